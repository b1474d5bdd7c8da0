// The single-process MPI stand-in (tests/gpu/mpi-single) that the device check builds with
// where a GPU machine has no MPI: the collectives of a group of one, sends to oneself, and a
// clear abort for anything that would wait forever or needs a second rank.
#include "mpi.h"

#include <gtest/gtest.h>
#include <vector>

namespace {

TEST(MpiSingle, OneRankAndCommunicators) {
    int argc = 0;
    char** argv = nullptr;
    ASSERT_EQ(MPI_Init(&argc, &argv), MPI_SUCCESS);
    int rank = -1, size = -1, flag = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    EXPECT_EQ(rank, 0);
    EXPECT_EQ(size, 1);
    MPI_Comm a = MPI_COMM_NULL, b = MPI_COMM_NULL, none = MPI_COMM_WORLD;
    MPI_Comm_split(MPI_COMM_WORLD, 3, 0, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, 0, &none);
    EXPECT_NE(a, MPI_COMM_NULL);
    EXPECT_NE(a, b); // distinct communicators keep their messages apart
    EXPECT_EQ(none, MPI_COMM_NULL);
    int* tag_ub = nullptr;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
    ASSERT_EQ(flag, 1);
    EXPECT_GE(*tag_ub, 32767);
    MPI_Comm_free(&a);
    EXPECT_EQ(a, MPI_COMM_NULL);
}

TEST(MpiSingle, CollectivesOfOneAreCopies) {
    std::vector<float> in = {1, 2, 3, 4}, out(4, 0.0f);
    MPI_Allreduce(in.data(), out.data(), 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(out, in);
    MPI_Allreduce(MPI_IN_PLACE, in.data(), 4, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(in[3], 4.0f);
    std::vector<double> g(6, -1.0), mine = {7.0, 8.0};
    const int counts[1] = {2}, displacements[1] = {3};
    MPI_Gatherv(mine.data(), 2, MPI_DOUBLE, g.data(), counts, displacements, MPI_DOUBLE, 0,
                MPI_COMM_WORLD);
    EXPECT_EQ(g, (std::vector<double>{-1, -1, -1, 7, 8, -1}));
    std::vector<float> v = {5, 6, 7}, w(5, 0.0f);
    const int sc[1] = {2}, sd[1] = {1}, rc[1] = {2}, rd[1] = {2};
    MPI_Alltoallv(v.data(), sc, sd, MPI_FLOAT, w.data(), rc, rd, MPI_FLOAT, MPI_COMM_WORLD);
    EXPECT_EQ(w, (std::vector<float>{0, 0, 6, 7, 0}));
}

TEST(MpiSingle, SendsToOneselfArriveInOrderPerTag) {
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    const int first[2] = {1, 2}, second[2] = {3, 4}, other[1] = {9};
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Isend(first, 2, MPI_INT, 0, 5, c, &r);
    MPI_Send(other, 1, MPI_INT, 0, 6, c);
    MPI_Send(second, 2, MPI_INT, 0, 5, c);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    int got[2] = {0, 0}, one = 0;
    MPI_Recv(&one, 1, MPI_INT, 0, 6, c, MPI_STATUS_IGNORE);
    EXPECT_EQ(one, 9);
    MPI_Recv(got, 2, MPI_INT, 0, 5, c, MPI_STATUS_IGNORE);
    EXPECT_EQ(got[0], 1);
    MPI_Recv(got, 2, MPI_INT, 0, 5, c, MPI_STATUS_IGNORE);
    EXPECT_EQ(got[1], 4);
}

TEST(MpiSingleDeathTest, AReceiveWithNoSendAbortsInsteadOfHanging) {
    int x = 0;
    EXPECT_DEATH(MPI_Recv(&x, 1, MPI_INT, 0, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                 "no matching send");
    EXPECT_DEATH(MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD), "to rank 1 in a world of one");
}

} // namespace
