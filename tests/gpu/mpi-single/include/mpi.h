/* A single-process stand-in for MPI: the subset of the MPI-3 C API Trident calls, for a world
 * of exactly one rank. It exists so the whole project — the CUDA trainer, `trident run
 * --backend cuda`, `trident profile --backend cuda` and their tests — builds and runs on a GPU
 * machine whose image has no MPI (tests/gpu/device-check.sh configures with
 * -DTRIDENT_MPI_SINGLE=ON only when find_package(MPI) fails there). Collectives over a group of
 * one are copies; a send to oneself is queued until the matching receive. Anything that would
 * need a second rank aborts with a message. Never used where a real MPI is found. */
#ifndef TRIDENT_MPI_SINGLE_H
#define TRIDENT_MPI_SINGLE_H

#ifdef __cplusplus
extern "C" {
#endif

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Request;
typedef int MPI_Info;
typedef int MPI_Errhandler;
typedef int MPI_Group;
typedef struct {
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
} MPI_Status;

#define MPI_SUCCESS 0
#define MPI_ERR_OTHER 15
#define MPI_MAX_ERROR_STRING 256
#define MPI_UNDEFINED (-32766)
#define MPI_COMM_NULL 0
#define MPI_COMM_WORLD 1
#define MPI_COMM_SELF 2
#define MPI_INFO_NULL 0
#define MPI_COMM_TYPE_SHARED 1
#define MPI_TAG_UB 1
#define MPI_ERRORS_RETURN 1
#define MPI_ERRORS_ARE_FATAL 0
#define MPI_REQUEST_NULL 0
#define MPI_STATUS_IGNORE ((MPI_Status*)0)
#define MPI_GROUP_NULL 0
#define MPI_ANY_SOURCE (-1)
#define MPI_ANY_TAG (-1)
#define MPI_THREAD_SINGLE 0
#define MPI_THREAD_FUNNELED 1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE 3
#define MPI_IN_PLACE ((void*)1)

#define MPI_CHAR 1
#define MPI_BYTE 2
#define MPI_INT 3
#define MPI_FLOAT 4
#define MPI_DOUBLE 5
#define MPI_LONG_LONG 6
#define MPI_INT64_T 7
#define MPI_UINT64_T 8

#define MPI_SUM 1
#define MPI_MAX 2
#define MPI_MIN 3

int MPI_Init(int* argc, char*** argv);
int MPI_Init_thread(int* argc, char*** argv, int required, int* provided);
int MPI_Query_thread(int* provided);
int MPI_Initialized(int* flag);
int MPI_Finalize(void);
int MPI_Finalized(int* flag);
int MPI_Abort(MPI_Comm comm, int code);
int MPI_Error_string(int code, char* text, int* length);

int MPI_Comm_rank(MPI_Comm comm, int* rank);
int MPI_Comm_size(MPI_Comm comm, int* size);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* out);
int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm* out);
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* out);
int MPI_Comm_free(MPI_Comm* comm);
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler handler);
int MPI_Comm_get_attr(MPI_Comm comm, int key, void* value, int* flag);
int MPI_Comm_group(MPI_Comm comm, MPI_Group* group);
int MPI_Group_translate_ranks(MPI_Group from, int n, const int* ranks, MPI_Group to, int* out);
int MPI_Group_free(MPI_Group* group);

int MPI_Barrier(MPI_Comm comm);
int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request);
int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status);
int MPI_Wait(MPI_Request* request, MPI_Status* status);
int MPI_Bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm);
int MPI_Allreduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm);
int MPI_Reduce_scatter_block(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm);
int MPI_Allgather(const void* in, int in_count, MPI_Datatype in_type, void* out, int out_count,
                  MPI_Datatype out_type, MPI_Comm comm);
int MPI_Gather(const void* in, int in_count, MPI_Datatype in_type, void* out, int out_count,
               MPI_Datatype out_type, int root, MPI_Comm comm);
int MPI_Gatherv(const void* in, int in_count, MPI_Datatype in_type, void* out,
                const int* out_counts, const int* displacements, MPI_Datatype out_type, int root,
                MPI_Comm comm);
int MPI_Alltoall(const void* in, int in_count, MPI_Datatype in_type, void* out, int out_count,
                 MPI_Datatype out_type, MPI_Comm comm);
int MPI_Alltoallv(const void* in, const int* in_counts, const int* in_displacements,
                  MPI_Datatype in_type, void* out, const int* out_counts,
                  const int* out_displacements, MPI_Datatype out_type, MPI_Comm comm);
int MPI_Send(const void* buffer, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm);
int MPI_Isend(const void* buffer, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
              MPI_Request* request);
int MPI_Recv(void* buffer, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
             MPI_Status* status);
int MPI_Iprobe(int peer, int tag, MPI_Comm comm, int* flag, MPI_Status* status);
int MPI_Request_free(MPI_Request* request);

#ifdef __cplusplus
}
#endif

#endif
