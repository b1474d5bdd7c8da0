// Byte-level BPE: GPT-2's byte alphabet and pre-tokenization, lossless round trips, training,
// GPT-2-format files in both directions, and refusal of malformed files.
#include "trident/core/spec_error.h"
#include "trident/data/bpe_tokenizer.h"
#include "trident/data/gpt2_byte_alphabet.h"
#include "trident/data/gpt2_pretokenizer.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <random>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace trident;
using data::BpeTokenizer;
using namespace std::string_literals;

namespace {

fs::path temp_dir(const std::string& name) {
    const fs::path dir =
        fs::temp_directory_path() / ("trident_tok_" + std::to_string(::getpid())) / name;
    fs::create_directories(dir);
    return dir;
}

std::string write_file(const fs::path& path, const std::string& content) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    return path.string();
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

std::vector<std::string> pieces(std::string_view text) {
    std::vector<std::string> out;
    data::Gpt2Pretokenizer pretokenizer(text);
    for (std::string_view piece; pretokenizer.next(piece);) out.emplace_back(piece);
    return out;
}

std::vector<std::int32_t> encode(const BpeTokenizer& t, std::string_view text) {
    std::vector<std::int32_t> ids;
    t.encode(text, ids);
    return ids;
}

BpeTokenizer train_on(const std::string& text, std::int32_t vocab_size, const std::string& name) {
    data::TextDocuments documents({write_file(temp_dir(name) / "corpus.txt", text)});
    return BpeTokenizer::train(documents, vocab_size);
}

// English-like text with some non-ASCII and made-up words, enough for several hundred merges.
std::string sample_corpus() {
    const char* sentences[] = {
        "The quick brown fox jumps over the lazy dog.",
        "It's a truth universally acknowledged that they'll train models on text.",
        "Pipeline parallelism splits the layers; tensor parallelism splits the matrices.",
        "In 2024, 1,234 GPUs ran for 56 days at 43% utilisation!!",
        "Café naïve résumé — déjà vu. 東京は日本の首都です。 Привет, мир!",
        "def main():\n    return 0\n",
    };
    const char* syllables[] = {"ka",  "ri", "to", "men", "sa", "lo", "qu", "ex",
                               "ing", "th", "er", "on",  "al", "st", "ve", "ur"};
    std::string text;
    std::mt19937 rng(7);
    for (int i = 0; i < 1500; ++i) {
        if (i % 3 == 0) {
            text += sentences[rng() % std::size(sentences)];
        } else {
            for (std::uint32_t s = 0, n = 1 + rng() % 4; s < n; ++s)
                text += syllables[rng() % std::size(syllables)];
        }
        text += (i % 9 == 8) ? "\n\n" : " ";
    }
    return text;
}

const BpeTokenizer& trained() {
    static const BpeTokenizer tokenizer = train_on(sample_corpus(), 600, "sample");
    return tokenizer;
}

// GPT-2's published bytes_to_unicode, written independently of the library: printable Latin-1
// stands for itself, the rest move to U+0100.. in byte order.
std::string gpt2_char(int byte) {
    int shifted = 0, code = -1;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        const int c = printable ? b : 256 + shifted++;
        if (b == byte) code = c;
    }
    std::string out;
    if (code < 0x80) {
        out += char(code);
    } else {
        out += char(0xC0 | (code >> 6));
        out += char(0x80 | (code & 0x3F));
    }
    return out;
}

// The 256 byte tokens in GPT-2's vocab.json order, as JSON members "X": id.
std::string byte_vocab_members() {
    std::vector<std::pair<int, int>> by_code; // (code point order key, byte)
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        by_code.push_back({printable ? b : 1000 + b, b});
    }
    std::sort(by_code.begin(), by_code.end());
    std::string members;
    for (std::size_t id = 0; id < by_code.size(); ++id) {
        std::string key = gpt2_char(by_code[id].second);
        if (key == "\"" || key == "\\") key = "\\" + key;
        members += (id ? ", \"" : "\"") + key + "\": " + std::to_string(id);
    }
    return members;
}

// GPT-2's reference merge loop (Python's bpe()): repeatedly find the lowest-ranked adjacent pair
// and merge all its occurrences left to right. O(n^2), on token byte strings.
std::vector<std::int32_t> reference_bpe(const BpeTokenizer& t, const std::string& piece) {
    std::map<std::pair<std::string, std::string>, std::size_t> ranks;
    for (std::size_t r = 0; r < t.merges().size(); ++r)
        ranks.emplace(
            std::pair{t.token_bytes(t.merges()[r].left), t.token_bytes(t.merges()[r].right)}, r);
    std::vector<std::string> word;
    for (char c : piece) word.emplace_back(1, c);
    for (;;) {
        std::size_t best = SIZE_MAX;
        std::pair<std::string, std::string> best_pair;
        for (std::size_t i = 0; i + 1 < word.size(); ++i)
            if (auto r = ranks.find({word[i], word[i + 1]}); r != ranks.end() && r->second < best)
                best = r->second, best_pair = r->first;
        if (best == SIZE_MAX) break;
        std::vector<std::string> merged;
        for (std::size_t i = 0; i < word.size();) {
            if (i + 1 < word.size() && word[i] == best_pair.first &&
                word[i + 1] == best_pair.second) {
                merged.push_back(word[i] + word[i + 1]);
                i += 2;
            } else {
                merged.push_back(word[i++]);
            }
        }
        word = merged;
    }
    std::vector<std::int32_t> ids;
    for (const auto& token : word) ids.push_back(*t.token_id(token));
    return ids;
}

// Training the slow way: recount every adjacent pair before each merge, take the most frequent
// (ties: smaller left id, then smaller right id). Returns each token's bytes in id order.
std::vector<std::string> reference_training(const std::vector<std::string>& documents,
                                            std::size_t tokens) {
    std::vector<std::string> vocab;
    for (int rank = 0; rank < 256; ++rank)
        vocab.emplace_back(1, char(data::gpt2_byte_at_rank(rank)));
    std::map<std::string, std::int32_t> ids;
    for (std::size_t id = 0; id < vocab.size(); ++id) ids[vocab[id]] = std::int32_t(id);
    std::map<std::string, std::int64_t> counts;
    for (const auto& document : documents)
        for (const auto& piece : pieces(document)) ++counts[piece];
    std::vector<std::pair<std::vector<std::int32_t>, std::int64_t>> words;
    for (const auto& [piece, count] : counts) {
        std::vector<std::int32_t> symbols;
        for (char c : piece) symbols.push_back(ids[std::string(1, c)]);
        words.push_back({symbols, count});
    }
    while (ids.size() < tokens) {
        std::map<std::pair<std::int32_t, std::int32_t>, std::int64_t> pairs;
        for (const auto& [symbols, count] : words)
            for (std::size_t i = 0; i + 1 < symbols.size(); ++i)
                pairs[{symbols[i], symbols[i + 1]}] += count;
        if (pairs.empty()) break;
        auto best = pairs.begin(); // map order: smaller ids first, so ">" keeps the first tie
        for (auto it = pairs.begin(); it != pairs.end(); ++it)
            if (it->second > best->second) best = it;
        const auto [a, b] = best->first;
        const std::string bytes = vocab[std::size_t(a)] + vocab[std::size_t(b)];
        if (!ids.count(bytes)) {
            ids[bytes] = std::int32_t(vocab.size());
            vocab.push_back(bytes);
        }
        const std::int32_t z = ids[bytes];
        for (auto& [symbols, count] : words) {
            std::vector<std::int32_t> merged;
            for (std::size_t i = 0; i < symbols.size();) {
                if (i + 1 < symbols.size() && symbols[i] == a && symbols[i + 1] == b) {
                    merged.push_back(z);
                    i += 2;
                } else {
                    merged.push_back(symbols[i++]);
                }
            }
            symbols = merged;
        }
    }
    return vocab;
}

std::string random_utf8(std::mt19937& rng, std::size_t characters) {
    // ASCII, Latin-1, Greek, CJK, Hangul, emoji (with skin tone and ZWJ), combining marks,
    // Unicode spaces, and the edges of each encoding length.
    const char32_t pool[] = {'a',     'Z',      '0',     ' ',     '\n',   '\t',   '\'',
                             '!',     '.',      0xE9,    0xA0,    0x3B1,  0x4E2D, 0x6587,
                             0xAC00,  0x1F600,  0x1F44B, 0x1F3FD, 0x200D, 0x301,  0x308,
                             0x3000,  0x2028,   0x7F,    0x80,    0x7FF,  0x800,  0xFFFF,
                             0x10000, 0x10FFFF, 0x665,   0x0E01,  0xFF21, 0x2160};
    std::string out;
    for (std::size_t i = 0; i < characters; ++i) {
        char32_t c = pool[rng() % std::size(pool)];
        if (c < 0x80) {
            out += char(c);
        } else if (c < 0x800) {
            out += char(0xC0 | (c >> 6));
            out += char(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            out += char(0xE0 | (c >> 12));
            out += char(0x80 | ((c >> 6) & 0x3F));
            out += char(0x80 | (c & 0x3F));
        } else {
            out += char(0xF0 | (c >> 18));
            out += char(0x80 | ((c >> 12) & 0x3F));
            out += char(0x80 | ((c >> 6) & 0x3F));
            out += char(0x80 | (c & 0x3F));
        }
    }
    return out;
}

core::SpecError load_refusal(const std::string& vocab, const std::string& merges) {
    try {
        BpeTokenizer::load(vocab, merges);
    } catch (const core::SpecError& e) {
        return e;
    }
    ADD_FAILURE() << "accepted " << vocab << " + " << merges;
    return core::SpecError("", "");
}

} // namespace

TEST(Gpt2ByteAlphabet, MatchesGpt2) {
    EXPECT_EQ(data::bytes_to_gpt2_text(" "), "Ġ");
    EXPECT_EQ(data::bytes_to_gpt2_text("\n"), "Ċ");
    EXPECT_EQ(data::bytes_to_gpt2_text(std::string(1, '\0')), "Ā");
    EXPECT_EQ(data::bytes_to_gpt2_text("\xAD"), "Ń");
    EXPECT_EQ(data::bytes_to_gpt2_text(" the"), "Ġthe");
    EXPECT_EQ(data::gpt2_byte_at_rank(0), '!');
    EXPECT_EQ(data::gpt2_byte_at_rank(188), 0);
    EXPECT_EQ(data::gpt2_byte_at_rank(220), ' '); // GPT-2's id of "Ġ"
    for (int b = 0; b < 256; ++b) {
        const std::string byte(1, char(b));
        EXPECT_EQ(data::bytes_to_gpt2_text(byte), gpt2_char(b)) << b;
        EXPECT_EQ(data::gpt2_text_to_bytes(data::bytes_to_gpt2_text(byte)), byte) << b;
    }
    EXPECT_EQ(data::gpt2_text_to_bytes("a b"), std::nullopt); // a plain space is not in it
    EXPECT_EQ(data::gpt2_text_to_bytes("€"), std::nullopt);
    EXPECT_EQ(data::gpt2_text_to_bytes("\xC1\x81"), std::nullopt); // overlong 'A'
}

TEST(Gpt2Pretokenizer, SplitsLikeGpt2) {
    using V = std::vector<std::string>;
    EXPECT_EQ(pieces("Hello world's 123 !!"), (V{"Hello", " world", "'s", " 123", " !!"}));
    EXPECT_EQ(
        pieces("I'm you're they'll we've he'd don't"),
        (V{"I", "'m", " you", "'re", " they", "'ll", " we", "'ve", " he", "'d", " don", "'t"}));
    EXPECT_EQ(pieces("IT'S 'tis"), (V{"IT", "'", "S", " '", "tis"})); // contractions: lower case
    EXPECT_EQ(pieces("abc123def"), (V{"abc", "123", "def"}));
    EXPECT_EQ(pieces("Hello  world"), (V{"Hello", " ", " world"}));
    EXPECT_EQ(pieces("a   b"), (V{"a", "  ", " b"}));
    EXPECT_EQ(pieces("a\n\nb"), (V{"a", "\n", "\n", "b"}));
    EXPECT_EQ(pieces("x  \ty"), (V{"x", "  ", "\t", "y"}));
    EXPECT_EQ(pieces("end.   "), (V{"end", ".", "   "}));
    EXPECT_EQ(pieces(" "), (V{" "}));
    EXPECT_EQ(pieces("    def f():\n        return 0\n"),
              (V{"   ", " def", " f", "():", "\n       ", " return", " 0", "\n"}));
    EXPECT_EQ(pieces("$5.99 (approx.)"), (V{"$", "5", ".", "99", " (", "approx", ".)"}));
    EXPECT_EQ(pieces(""), V{});
}

TEST(Gpt2Pretokenizer, ClassifiesNonAsciiLettersDigitsAndSpaces) {
    using V = std::vector<std::string>;
    EXPECT_EQ(pieces("café naïve Ωmega Привет 東京 日本語"),
              (V{"café", " naïve", " Ωmega", " Привет", " 東京", " 日本語"}));
    EXPECT_EQ(pieces("x ٣٤ ²"), (V{"x", " ٣٤", " ²"}));         // Arabic-Indic digits, superscript
    EXPECT_EQ(pieces("hi 👋🏽!"), (V{"hi", " 👋🏽!"})); // emoji are "other"
    EXPECT_EQ(pieces("e\xCC\x81t"), (V{"e", "\xCC\x81", "t"})); // a combining mark is not \p{L}
    EXPECT_EQ(pieces("a\u3000\u3000b"), (V{"a", "\u3000", "\u3000", "b"}));   // ideographic space
    EXPECT_EQ(pieces("a\xFF\xFE b\xC3"), (V{"a", "\xFF\xFE", " b", "\xC3"})); // invalid bytes
}

TEST(Gpt2Pretokenizer, PiecesConcatenateToAnyByteString) {
    for (std::uint32_t seed = 0; seed < 200; ++seed) {
        std::mt19937 rng(seed);
        std::string text(rng() % 200, '\0');
        for (char& c : text) c = char(rng());
        std::string joined;
        for (const auto& piece : pieces(text)) {
            EXPECT_FALSE(piece.empty());
            joined += piece;
        }
        EXPECT_EQ(joined, text) << "seed " << seed;
    }
}

TEST(BpeTokenizer, RoundTripsArbitraryUtf8) {
    const BpeTokenizer& t = trained();
    for (std::uint32_t seed = 0; seed < 300; ++seed) {
        std::mt19937 rng(seed);
        const std::string text = random_utf8(rng, rng() % 300);
        EXPECT_EQ(t.decode(encode(t, text)), text) << "seed " << seed;
    }
    for (const std::string& text :
         {"東京は日本の首都です。"s, "👩‍👩‍👧‍👦 family 🇯🇵"s, "Zalgo: z̷̢a̸l̶g̵o̴"s,
          "ﬁne ﬂour"s,
          "\xEF\xBB\xBF"
          "BOM"s,
          "tab\tnul\0end"s})
        EXPECT_EQ(t.decode(encode(t, text)), text);
}

TEST(BpeTokenizer, RoundTripsInvalidAndRandomBytes) {
    const BpeTokenizer& t = trained();
    for (const std::string& text : {std::string("\xFF\xFE\xFD"), std::string("\xC3"),
                                    std::string("a\x80"
                                                "b"),
                                    std::string("\xED\xA0\x80"), std::string("\xF4\x90\x80\x80"),
                                    std::string("\xC0\xAF"), std::string(5, '\0')})
        EXPECT_EQ(t.decode(encode(t, text)), text);
    for (std::uint32_t seed = 0; seed < 300; ++seed) {
        std::mt19937 rng(seed);
        std::string text(rng() % 500, '\0');
        for (char& c : text) c = char(rng() % 4 == 0 ? rng() : "the fox 'sa\n"[rng() % 12]);
        EXPECT_EQ(t.decode(encode(t, text)), text) << "seed " << seed;
    }
}

TEST(BpeTokenizer, MergesLikeGpt2sReferenceLoop) {
    const BpeTokenizer& t = trained();
    for (std::uint32_t seed = 0; seed < 300; ++seed) {
        std::mt19937 rng(seed);
        const std::string text = random_utf8(rng, 1 + rng() % 40) + " the quick lazy parallelism";
        for (const auto& piece : pieces(text))
            EXPECT_EQ(encode(t, piece), reference_bpe(t, piece)) << "piece '" << piece << "'";
    }
    const std::string long_piece(5000, 'e');
    EXPECT_EQ(encode(t, long_piece), reference_bpe(t, long_piece));
}

TEST(BpeTokenizer, EncodesTheSameFromSeveralThreads) {
    const BpeTokenizer& t = trained();
    const std::string text = sample_corpus();
    const auto expected = encode(t, text);
    std::vector<std::vector<std::int32_t>> results(4);
    std::vector<std::thread> threads;
    for (auto& result : results)
        threads.emplace_back([&t, &text, &result] {
            for (int i = 0; i < 3; ++i) {
                result.clear();
                t.encode(text, result);
            }
        });
    for (auto& thread : threads) thread.join();
    for (const auto& result : results) EXPECT_EQ(result, expected);
}

TEST(BpeTokenizer, TrainingLearnsTheMostFrequentPairsFirst) {
    // Pieces: "low" x3 (one at the start, two after spaces), " lower", " lowest".
    const BpeTokenizer t = train_on("low lower lowest low low", 262, "low");
    ASSERT_EQ(t.vocab_size(), 262);
    ASSERT_EQ(t.merge_count(), 5u);
    std::vector<std::string> learned;
    for (std::int32_t id = 256; id < 261; ++id) learned.push_back(t.token_bytes(id));
    // (l,o) and (o,w) both occur 5 times: the smaller left id wins; ties of 1 at the end too.
    EXPECT_EQ(learned, (std::vector<std::string>{"lo", "low", " low", " lowe", "st"}));
    EXPECT_EQ(t.eod(), 261);
    EXPECT_EQ(t.token_bytes(261), "<|endoftext|>");
    for (int rank = 0; rank < 256; ++rank)
        EXPECT_EQ(t.token_bytes(rank), std::string(1, char(data::gpt2_byte_at_rank(rank))));
    EXPECT_EQ(encode(t, "low lowest"), (std::vector<std::int32_t>{257, 259, 260}));
}

TEST(BpeTokenizer, IncrementalTrainingMatchesRecountingEveryStep) {
    // Few letters and repeats ("aaaa", "abab") make overlapping and adjacent occurrences common.
    for (std::uint32_t seed = 0; seed < 20; ++seed) {
        std::mt19937 rng(seed);
        std::string text;
        for (int w = 0; w < 200; ++w) {
            const std::uint32_t length = 1 + rng() % 9;
            if (rng() % 4 == 0) text += ' ';
            for (std::uint32_t i = 0; i < length; ++i) text += "aab c"[rng() % (seed % 2 ? 3 : 5)];
            text += rng() % 3 ? " " : "\n\n";
        }
        const std::string path = write_file(temp_dir("incremental") / "corpus.txt", text);
        std::vector<std::string> documents;
        data::TextDocuments reader({path});
        for (std::string d; reader.next(d);) documents.push_back(d);
        const auto expected = reference_training(documents, 256 + 40);
        const auto size = std::int32_t(expected.size() + 1);
        data::TextDocuments again({path});
        const BpeTokenizer t = BpeTokenizer::train(again, size);
        ASSERT_EQ(t.vocab_size(), size) << "seed " << seed;
        for (std::int32_t id = 0; id + 1 < size; ++id)
            EXPECT_EQ(t.token_bytes(id), expected[std::size_t(id)])
                << "seed " << seed << " id " << id;
    }
}

TEST(BpeTokenizer, LongWordsTrainAndEncodeInNearLinearTime) {
    // One 1 MB word: merging must not cost a vector erase per occurrence (that took minutes).
    const std::string word(1'000'000, 'a');
    const auto start = std::chrono::steady_clock::now();
    const BpeTokenizer t = train_on(word + "\n\n" + std::string(200'000, 'b'), 280, "long");
    EXPECT_EQ(t.vocab_size(), 280);
    EXPECT_EQ(t.decode(encode(t, word)), word);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 20.0); // about 0.2 s; quadratic code takes minutes
}

TEST(BpeTokenizer, TrainingReachesExactlyTheRequestedSize) {
    for (std::int32_t size : {257, 300, 600}) {
        const BpeTokenizer t = train_on(sample_corpus(), size, "sizes");
        EXPECT_EQ(t.vocab_size(), size);
        EXPECT_EQ(t.eod(), size - 1);
    }
}

TEST(BpeTokenizer, TrainingIsDeterministic) {
    const BpeTokenizer a = train_on(sample_corpus(), 500, "det_a");
    const BpeTokenizer b = train_on(sample_corpus(), 500, "det_b");
    ASSERT_EQ(a.merge_count(), b.merge_count());
    for (std::int32_t id = 0; id < a.vocab_size(); ++id)
        EXPECT_EQ(a.token_bytes(id), b.token_bytes(id));
}

TEST(BpeTokenizer, TrainingRefusesImpossibleSizes) {
    for (std::int32_t size : {0, 100, 256}) {
        try {
            train_on("some text", size, "small");
            ADD_FAILURE() << size;
        } catch (const core::SpecError& e) {
            EXPECT_EQ(e.field(), "--vocab-size");
            EXPECT_NE(e.reason().find("at least 257"), std::string::npos) << e.reason();
        }
    }
    try {
        train_on("ab ab", 1000, "tiny");
        ADD_FAILURE() << "a 2-word text cannot give 1000 tokens";
    } catch (const core::SpecError& e) {
        EXPECT_EQ(e.field(), "--vocab-size");
        EXPECT_NE(e.reason().find("more than this text supports"), std::string::npos);
    }
}

TEST(BpeTokenizer, SavesGpt2FormatAndLoadsItBack) {
    const BpeTokenizer& t = trained();
    const fs::path dir = temp_dir("saved") / "new" / "sub"; // save creates it
    fs::remove_all(dir);
    t.save(dir.string());
    const std::string vocab = read_file(dir / "vocab.json");
    const std::string merges = read_file(dir / "merges.txt");
    EXPECT_EQ(vocab.rfind("{\"!\": 0, \"\\\"\": 1, \"#\": 2,", 0), 0u) << vocab.substr(0, 40);
    EXPECT_NE(vocab.find("\"\\u0120\": 220"), std::string::npos); // "Ġ", escaped like json.dumps
    EXPECT_NE(vocab.find("\"<|endoftext|>\": 599}"), std::string::npos);
    EXPECT_EQ(merges.rfind("#version: 0.2\n", 0), 0u);
    EXPECT_EQ(std::count(merges.begin(), merges.end(), '\n'), std::ptrdiff_t(t.merge_count() + 1));

    const BpeTokenizer loaded =
        BpeTokenizer::load((dir / "vocab.json").string(), (dir / "merges.txt").string());
    EXPECT_EQ(loaded.vocab_size(), t.vocab_size());
    EXPECT_EQ(loaded.eod(), t.eod());
    EXPECT_EQ(loaded.merge_count(), t.merge_count());
    const std::string text = sample_corpus() + random_utf8(*std::make_unique<std::mt19937>(3), 500);
    EXPECT_EQ(encode(loaded, text), encode(t, text));
}

TEST(BpeTokenizer, LoadsAHandWrittenGpt2Vocabulary) {
    const fs::path dir = temp_dir("hand");
    const std::string vocab =
        write_file(dir / "vocab.json", "{" + byte_vocab_members() +
                                           ", \"\\u0120t\": 256, \"he\": 257, \"Ġthe\": 258, "
                                           "\"<|endoftext|>\": 259}");
    const std::string merges = write_file(dir / "merges.txt", "#version: 0.2\nĠ t\nh e\nĠt he\n");
    const BpeTokenizer t = BpeTokenizer::load(vocab, merges);
    EXPECT_EQ(t.vocab_size(), 260);
    EXPECT_EQ(t.eod(), 259);
    EXPECT_EQ(t.merge_count(), 3u);
    // 't' is GPT-2's id 83, "Ġ" 220, "Ċ" 198, "!" 0.
    EXPECT_EQ(encode(t, "the the"), (std::vector<std::int32_t>{83, 257, 258}));
    EXPECT_EQ(encode(t, "!\n "), (std::vector<std::int32_t>{0, 198, 220}));
    EXPECT_EQ(encode(t, " then"), (std::vector<std::int32_t>{258, 77}));
    EXPECT_EQ(t.decode(std::vector<std::int32_t>{258, 259, 83}), " the<|endoftext|>t");
    EXPECT_THROW(t.decode(std::vector<std::int32_t>{260}), core::SpecError);

    // Without a #version line and with CRLF endings the merges read the same.
    const std::string crlf = write_file(dir / "crlf.txt", "Ġ t\r\nh e\r\nĠt he\r\n");
    EXPECT_EQ(encode(BpeTokenizer::load(vocab, crlf), " the"), (std::vector<std::int32_t>{258}));
}

TEST(BpeTokenizer, RefusesMalformedFilesNamingThem) {
    const fs::path dir = temp_dir("malformed");
    const std::string bytes = byte_vocab_members();
    const std::string good_vocab =
        write_file(dir / "vocab.json", "{" + bytes + ", \"he\": 256, \"<|endoftext|>\": 257}");
    const std::string good_merges = write_file(dir / "merges.txt", "#version: 0.2\nh e\n");
    EXPECT_NO_THROW(BpeTokenizer::load(good_vocab, good_merges));

    struct Case {
        std::string vocab, merges, field, reason;
    };
    auto vocab_file = [&](const std::string& name, const std::string& text) {
        return write_file(dir / name, text);
    };
    const std::string not_json = vocab_file("not_json.json", "{\"a\": 0,");
    const std::string array = vocab_file("array.json", "[1, 2]");
    // Found by the fuzzer: a number too large for a double is out_of_range, not a parse_error.
    const std::string huge = vocab_file("huge.json", "{\"a\": 109E555555555555555555}");
    const std::string no_eod = vocab_file("no_eod.json", "{" + bytes + "}");
    const std::string no_byte = vocab_file("no_byte.json", "{\"<|endoftext|>\": 0}");
    const std::string bad_id =
        vocab_file("bad_id.json", "{" + bytes + ", \"<|endoftext|>\": \"256\"}");
    const std::string gap = vocab_file("gap.json", "{" + bytes + ", \"<|endoftext|>\": 300}");
    const std::string space = vocab_file("space.json", "{" + bytes + ", \"a b\": 256}");
    const std::string missing = (dir / "missing.json").string();
    const std::string three = write_file(dir / "three.txt", "#version: 0.2\nh e x\n");
    const std::string unknown = write_file(dir / "unknown.txt", "h e\n\nq zz\n");
    const std::string unmerged = write_file(dir / "unmerged.txt", "h e\nh h\n");
    const std::string repeated = write_file(dir / "repeated.txt", "h e\nh e\n");
    const Case cases[] = {
        {not_json, good_merges, not_json, "JSON syntax error at line 1, column 9"},
        {huge, good_merges, huge, "JSON number out of range"},
        {array, good_merges, array, "JSON object"},
        {no_eod, good_merges, no_eod, "<|endoftext|>"},
        {no_byte, good_merges, no_byte, "has no token for the byte 0"},
        {bad_id, good_merges, bad_id, "ids must be the integers 0..256"},
        {gap, good_merges, gap, "ids must be the integers"},
        {space, good_merges, space, "outside GPT-2's byte alphabet"},
        {missing, good_merges, missing, "no such file"},
        {good_vocab, (dir / "none.txt").string(), (dir / "none.txt").string(), "no such file"},
        {good_vocab, three, three + ":2", "two tokens separated by one space"},
        {good_vocab, unknown, unknown + ":3", "token \"zz\" is not in " + good_vocab},
        {good_vocab, unmerged, unmerged + ":2", "merged token \"hh\" is not in"},
        {good_vocab, repeated, repeated + ":2", "repeats an earlier merge"},
    };
    for (const Case& c : cases) {
        const auto e = load_refusal(c.vocab, c.merges);
        EXPECT_EQ(e.field(), c.field);
        EXPECT_NE(e.reason().find(c.reason), std::string::npos)
            << c.field << ": " << e.reason() << "\n  wanted: " << c.reason;
    }
}

TEST(BpeTokenizer, TrainsOnALicenseTextAndRoundTripsItThroughFiles) {
    const std::string corpus = "/usr/share/common-licenses/GPL-3"; // Debian's base-files
    if (!fs::exists(corpus)) GTEST_SKIP() << corpus << " is not installed";
    data::TextDocuments documents({corpus});
    const BpeTokenizer t = BpeTokenizer::train(documents, 512);
    const fs::path dir = temp_dir("gpl");
    t.save(dir.string());
    const BpeTokenizer loaded =
        BpeTokenizer::load((dir / "vocab.json").string(), (dir / "merges.txt").string());
    const std::string text = read_file(corpus);
    const auto ids = encode(loaded, text);
    EXPECT_EQ(ids, encode(t, text));
    EXPECT_EQ(loaded.decode(ids), text);
    EXPECT_LT(ids.size(), text.size() / 2); // 255 merges compress English well over 2x
}
