// The single-process MPI stand-in; see include/mpi.h.
#include "mpi.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace {

struct State {
    std::mutex mutex;
    int next_comm = 3; // 0 null, 1 world, 2 self
    bool initialized = false, finalized = false;
    // Messages a rank sent to itself, by (communicator, tag), in order.
    std::map<std::pair<int, int>, std::deque<std::vector<char>>> queued;
};

State& state() {
    static State s;
    return s;
}

[[noreturn]] void fail(const std::string& what) {
    std::fprintf(stderr, "trident (single-process MPI): %s\n", what.c_str());
    std::fflush(stderr);
    std::abort();
}

std::size_t bytes_of(MPI_Datatype type) {
    switch (type) {
    case MPI_CHAR:
    case MPI_BYTE:
        return 1;
    case MPI_INT:
    case MPI_FLOAT:
        return 4;
    case MPI_DOUBLE:
    case MPI_LONG_LONG:
    case MPI_INT64_T:
    case MPI_UINT64_T:
        return 8;
    default:
        fail("unknown datatype " + std::to_string(type));
    }
}

void check_peer(int peer, const char* call) {
    if (peer != 0)
        fail(std::string(call) + " to rank " + std::to_string(peer) + " in a world of one");
}

// A collective's result for one rank: its own contribution.
void copy_unless_in_place(const void* in, void* out, int count, MPI_Datatype type) {
    if (in == MPI_IN_PLACE || in == out || count <= 0) return;
    std::memmove(out, in, std::size_t(count) * bytes_of(type));
}

} // namespace

extern "C" {

int MPI_Init(int*, char***) {
    state().initialized = true;
    return MPI_SUCCESS;
}
int MPI_Init_thread(int* argc, char*** argv, int, int* provided) {
    *provided = MPI_THREAD_MULTIPLE; // one process, and the state is behind a mutex
    return MPI_Init(argc, argv);
}
int MPI_Query_thread(int* provided) {
    *provided = MPI_THREAD_MULTIPLE;
    return MPI_SUCCESS;
}
int MPI_Initialized(int* flag) {
    *flag = state().initialized ? 1 : 0;
    return MPI_SUCCESS;
}
int MPI_Finalize(void) {
    state().finalized = true;
    return MPI_SUCCESS;
}
int MPI_Finalized(int* flag) {
    *flag = state().finalized ? 1 : 0;
    return MPI_SUCCESS;
}
int MPI_Abort(MPI_Comm, int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);
}
int MPI_Error_string(int code, char* text, int* length) {
    const std::string s = "single-process MPI error " + std::to_string(code);
    std::snprintf(text, MPI_MAX_ERROR_STRING, "%s", s.c_str());
    *length = int(std::strlen(text));
    return MPI_SUCCESS;
}

int MPI_Comm_rank(MPI_Comm, int* rank) {
    *rank = 0;
    return MPI_SUCCESS;
}
int MPI_Comm_size(MPI_Comm, int* size) {
    *size = 1;
    return MPI_SUCCESS;
}
int MPI_Comm_split(MPI_Comm, int color, int, MPI_Comm* out) {
    if (color == MPI_UNDEFINED) {
        *out = MPI_COMM_NULL;
        return MPI_SUCCESS;
    }
    std::lock_guard<std::mutex> lock(state().mutex);
    *out = state().next_comm++;
    return MPI_SUCCESS;
}
int MPI_Comm_split_type(MPI_Comm comm, int, int key, MPI_Info, MPI_Comm* out) {
    return MPI_Comm_split(comm, 0, key, out);
}
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* out) {
    return MPI_Comm_split(comm, 0, 0, out);
}
int MPI_Comm_free(MPI_Comm* comm) {
    *comm = MPI_COMM_NULL;
    return MPI_SUCCESS;
}
int MPI_Comm_set_errhandler(MPI_Comm, MPI_Errhandler) {
    return MPI_SUCCESS;
}
int MPI_Comm_get_attr(MPI_Comm, int key, void* value, int* flag) {
    static int tag_ub = 1 << 30;
    *flag = key == MPI_TAG_UB ? 1 : 0;
    if (*flag) *static_cast<int**>(value) = &tag_ub;
    return MPI_SUCCESS;
}

int MPI_Comm_group(MPI_Comm, MPI_Group* group) {
    *group = 1;
    return MPI_SUCCESS;
}
int MPI_Group_translate_ranks(MPI_Group, int n, const int* ranks, MPI_Group, int* out) {
    for (int i = 0; i < n; ++i) out[i] = ranks[i];
    return MPI_SUCCESS;
}
int MPI_Group_free(MPI_Group* group) {
    *group = MPI_GROUP_NULL;
    return MPI_SUCCESS;
}
int MPI_Barrier(MPI_Comm) {
    return MPI_SUCCESS;
}
int MPI_Ibarrier(MPI_Comm, MPI_Request* request) {
    *request = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}
int MPI_Test(MPI_Request* request, int* flag, MPI_Status*) {
    *request = MPI_REQUEST_NULL;
    *flag = 1;
    return MPI_SUCCESS;
}
int MPI_Wait(MPI_Request* request, MPI_Status*) {
    *request = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}
int MPI_Bcast(void*, int, MPI_Datatype, int root, MPI_Comm) {
    check_peer(root, "MPI_Bcast");
    return MPI_SUCCESS;
}
int MPI_Allreduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op, MPI_Comm) {
    copy_unless_in_place(in, out, count, type);
    return MPI_SUCCESS;
}
int MPI_Reduce_scatter_block(const void* in, void* out, int count, MPI_Datatype type, MPI_Op,
                             MPI_Comm) {
    copy_unless_in_place(in, out, count, type);
    return MPI_SUCCESS;
}
int MPI_Allgather(const void* in, int in_count, MPI_Datatype in_type, void* out, int, MPI_Datatype,
                  MPI_Comm) {
    copy_unless_in_place(in, out, in_count, in_type);
    return MPI_SUCCESS;
}
int MPI_Gather(const void* in, int in_count, MPI_Datatype in_type, void* out, int, MPI_Datatype,
               int root, MPI_Comm) {
    check_peer(root, "MPI_Gather");
    copy_unless_in_place(in, out, in_count, in_type);
    return MPI_SUCCESS;
}
int MPI_Gatherv(const void* in, int in_count, MPI_Datatype in_type, void* out, const int*,
                const int* displacements, MPI_Datatype out_type, int root, MPI_Comm) {
    check_peer(root, "MPI_Gatherv");
    if (in == MPI_IN_PLACE) return MPI_SUCCESS;
    copy_unless_in_place(
        in, static_cast<char*>(out) + std::size_t(displacements[0]) * bytes_of(out_type), in_count,
        in_type);
    return MPI_SUCCESS;
}
int MPI_Alltoall(const void* in, int in_count, MPI_Datatype in_type, void* out, int, MPI_Datatype,
                 MPI_Comm) {
    copy_unless_in_place(in, out, in_count, in_type);
    return MPI_SUCCESS;
}
int MPI_Alltoallv(const void* in, const int* in_counts, const int* in_displacements,
                  MPI_Datatype in_type, void* out, const int*, const int* out_displacements,
                  MPI_Datatype out_type, MPI_Comm) {
    const std::size_t in_bytes = bytes_of(in_type), out_bytes = bytes_of(out_type);
    copy_unless_in_place(static_cast<const char*>(in) + std::size_t(in_displacements[0]) * in_bytes,
                         static_cast<char*>(out) + std::size_t(out_displacements[0]) * out_bytes,
                         in_counts[0], in_type);
    return MPI_SUCCESS;
}
int MPI_Send(const void* buffer, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm) {
    check_peer(peer, "MPI_Send");
    const auto* p = static_cast<const char*>(buffer);
    std::lock_guard<std::mutex> lock(state().mutex);
    state().queued[{comm, tag}].emplace_back(p, p + std::size_t(count) * bytes_of(type));
    return MPI_SUCCESS;
}
int MPI_Isend(const void* buffer, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
              MPI_Request* request) {
    *request = MPI_REQUEST_NULL; // the data is copied: complete at once
    return MPI_Send(buffer, count, type, peer, tag, comm);
}
int MPI_Recv(void* buffer, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
             MPI_Status* status) {
    check_peer(peer, "MPI_Recv");
    std::lock_guard<std::mutex> lock(state().mutex);
    auto it = state().queued.find({comm, tag});
    if (it == state().queued.end() || it->second.empty())
        fail("MPI_Recv with tag " + std::to_string(tag) +
             " has no matching send: it would wait forever");
    std::vector<char> message = std::move(it->second.front());
    it->second.pop_front();
    const std::size_t room = std::size_t(count) * bytes_of(type);
    if (message.size() > room) fail("MPI_Recv: message longer than the receive buffer");
    std::memcpy(buffer, message.data(), message.size());
    if (status) *status = MPI_Status{0, tag, MPI_SUCCESS};
    return MPI_SUCCESS;
}

int MPI_Iprobe(int peer, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
    std::lock_guard<std::mutex> lock(state().mutex);
    *flag = 0;
    for (const auto& [key, messages] : state().queued)
        if (key.first == comm && (tag == MPI_ANY_TAG || key.second == tag) && !messages.empty() &&
            (peer == MPI_ANY_SOURCE || peer == 0)) {
            *flag = 1;
            if (status) *status = MPI_Status{0, key.second, MPI_SUCCESS};
            break;
        }
    return MPI_SUCCESS;
}
int MPI_Request_free(MPI_Request* request) {
    *request = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

} // extern "C"
