/* dtrain's C ABI: data-parallel collectives for programs that bring their own model.
 *
 * One header, plain C (C89 types plus <stdint.h>), usable from C, C++ and Python's ctypes. Every
 * symbol of libdtrain.so is declared here; everything else in the library is hidden.
 *
 * Versioning: DTRAIN_ABI_VERSION changes whenever a declaration here changes incompatibly (it is
 * also the library's SONAME suffix, libdtrain.so.<abi>). A program compares dtrain_abi_version()
 * with the DTRAIN_ABI_VERSION it was compiled against; dtrain_init refuses nothing, the check is the
 * caller's (dtrain_check_abi does it in one call).
 *
 * Errors are values: every function that can fail returns an int status, DTRAIN_OK (0) or one of
 * the dtrain_status codes, and leaves a text naming the argument or the operation in
 * dtrain_last_error() (per thread). Nothing throws across this boundary and no bad argument ends
 * the process or the MPI job.
 *
 * Threading: dtrain_init* and dtrain_shutdown are called from one thread, once each, on every rank
 * (they are collective). Between them every other function may be called from any thread. MPI must
 * provide MPI_THREAD_MULTIPLE: the library's background thread calls MPI beside the caller.
 *
 * Collectives are named and asynchronous. Each call queues the operation and returns at once with a
 * handle; a background thread matches operations across ranks by name (ranks may submit them in
 * any order), executes those that every rank has submitted in one order agreed by rank 0, fusing
 * small all-reduces, and completes the handles. The caller keeps the buffers alive and untouched
 * until dtrain_wait returns (or dtrain_poll reports done). A name may be reused once its previous
 * operation is done on this rank. Ranks that submit one name with different kind, count, dtype, op,
 * root or scale factors all get DTRAIN_ERR_MISMATCH naming the operation, the ranks and what
 * differs.
 *
 * Buffers: `device` is DTRAIN_HOST for host memory (`stream` is ignored) or DTRAIN_CUDA for device
 * memory of this rank's GPU (dtrain_gpu()), ordered on the caller's cudaStream_t `stream` (NULL:
 * the legacy default stream). Buffers are aligned to their element size; counts are elements, >= 0.
 *
 * Streams: a DTRAIN_CUDA call records an event on `stream` and returns; the library's own stream
 * waits for that event (the host never does), runs the collective and records a completion event.
 * Work queued on `stream` before the call is what the operation reads. Then either
 * dtrain_wait / dtrain_poll wait for the completion on the host, or dtrain_wait_stream makes a
 * stream of yours wait for it without waiting for the GPU (the host waits only until the library
 * has queued the work and, across nodes, run its cross-node step). Device buffers need a CUDA
 * build and a GPU on every rank (DTRAIN_ERR_UNSUPPORTED names what is missing); a host pointer
 * passed as DTRAIN_CUDA, or a device pointer as DTRAIN_HOST, is DTRAIN_ERR_INVALID_ARGUMENT naming
 * the argument (host buffers are checked once this rank has used device buffers).
 */
#ifndef DTRAIN_DTRAIN_H_
#define DTRAIN_DTRAIN_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define DTRAIN_API
#else
#define DTRAIN_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define DTRAIN_ABI_VERSION 1

typedef enum dtrain_status {
  DTRAIN_OK = 0,
  DTRAIN_ERR_INVALID_ARGUMENT = 1, /* a bad argument; the text names it */
  DTRAIN_ERR_NOT_INITIALIZED = 2,  /* before dtrain_init or after dtrain_shutdown */
  DTRAIN_ERR_MISMATCH = 3,         /* ranks disagree on an operation of one name */
  DTRAIN_ERR_STALLED = 4,          /* some rank never submitted the name (DTRAIN_STALL_ABORT_SECONDS) */
  DTRAIN_ERR_MPI = 5,              /* MPI failed, or lacks MPI_THREAD_MULTIPLE */
  DTRAIN_ERR_UNSUPPORTED = 6,      /* valid but not available here (device buffers on a CPU rank) */
  DTRAIN_ERR_UNKNOWN_HANDLE = 7,   /* never issued, or already waited */
  DTRAIN_ERR_SHUT_DOWN = 8,        /* the operation was pending when the library shut down */
  DTRAIN_ERR_INTERNAL = 9
} dtrain_status;

typedef enum dtrain_dtype {
  DTRAIN_UINT8 = 0,
  DTRAIN_INT8 = 1,
  DTRAIN_INT32 = 2,
  DTRAIN_INT64 = 3,
  DTRAIN_FLOAT16 = 4,
  DTRAIN_BFLOAT16 = 5,
  DTRAIN_FLOAT32 = 6,
  DTRAIN_FLOAT64 = 7
} dtrain_dtype;

/* Average divides the sum by the world size (floating-point dtypes only). fp16 and bf16 sums are
 * computed in fp32 and rounded once. */
typedef enum dtrain_op { DTRAIN_SUM = 0, DTRAIN_AVERAGE = 1, DTRAIN_MIN = 2, DTRAIN_MAX = 3 } dtrain_op;

typedef enum dtrain_device { DTRAIN_HOST = 0, DTRAIN_CUDA = 1 } dtrain_device;

/* An operation in flight; 0 is never a valid handle. */
typedef int64_t dtrain_handle;

/* --- version and errors ------------------------------------------------------------------ */
DTRAIN_API const char* dtrain_version(void); /* "0.1.0" */
DTRAIN_API int dtrain_abi_version(void);     /* DTRAIN_ABI_VERSION of the library */
/* DTRAIN_OK when the library's ABI is `expected` (pass DTRAIN_ABI_VERSION), else an error. */
DTRAIN_API int dtrain_check_abi(int expected);
/* The text of this thread's last failed call; "" if none. Valid until this thread's next call. */
DTRAIN_API const char* dtrain_last_error(void);
/* "DTRAIN_ERR_MISMATCH", ... */
DTRAIN_API const char* dtrain_status_name(int status);

/* --- life cycle (collective) ------------------------------------------------------------- */
/* MPI_COMM_WORLD. Initializes MPI (MPI_THREAD_MULTIPLE) unless the caller already did; then MPI
 * stays the caller's to finalize. */
DTRAIN_API int dtrain_init(void);
/* The ranks of an existing communicator: `mpi_comm` is the MPI_Comm value itself (Open MPI: a
 * pointer; from mpi4py: MPI._handleof(comm)). MPI must be initialized by the caller. */
DTRAIN_API int dtrain_init_comm(void* mpi_comm);
/* The same from a Fortran handle (MPI_Comm_c2f), portable across MPI libraries. */
DTRAIN_API int dtrain_init_comm_fortran(int64_t fortran_comm);
/* Finishes the operations every rank has submitted, fails the others with DTRAIN_ERR_SHUT_DOWN,
 * frees everything; finalizes MPI if dtrain_init started it. */
DTRAIN_API int dtrain_shutdown(void);
DTRAIN_API int dtrain_is_initialized(void); /* 1 or 0 */

/* --- topology (-1 before init) -------------------------------------------------------------- */
DTRAIN_API int dtrain_rank(void);
DTRAIN_API int dtrain_size(void);
DTRAIN_API int dtrain_local_rank(void); /* among the ranks of this node */
DTRAIN_API int dtrain_local_size(void);
DTRAIN_API int dtrain_cross_rank(void); /* this node's index */
DTRAIN_API int dtrain_cross_size(void); /* nodes */
/* The GPU this rank would use (local rank mod visible GPUs), or -1 on a rank without one. */
DTRAIN_API int dtrain_gpu(void);

/* --- collectives: queue and return a handle -------------------------------------------------- */
/* recv = op over ranks of send, with send scaled by `prescale` and the result by `postscale`
 * (floating-point dtypes; pass 1.0 otherwise). In place: send == recv. */
DTRAIN_API int dtrain_allreduce(const char* name, const void* send, void* recv, int64_t count, int dtype, int op,
                                double prescale, double postscale, int device, void* stream, dtrain_handle* handle);
/* `buffer` of `count` elements, sent by `root`, received by every other rank. */
DTRAIN_API int dtrain_broadcast(const char* name, void* buffer, int64_t count, int dtype, int root, int device,
                                void* stream, dtrain_handle* handle);
/* Every rank sends `count` elements (counts may differ per rank: the first dimension of a tensor);
 * recv receives them in rank order and holds `recv_capacity` elements, which must cover the sum
 * (every rank is told which rank's capacity was short). `recv_counts`, if not NULL, holds
 * dtrain_size() entries and receives each rank's count when the operation is done. */
DTRAIN_API int dtrain_allgather(const char* name, const void* send, int64_t count, void* recv, int64_t recv_capacity,
                                int64_t* recv_counts, int dtype, int device, void* stream, dtrain_handle* handle);
/* send holds count x size elements; recv receives this rank's `count` of the reduction. In place:
 * recv == send + rank x count. */
DTRAIN_API int dtrain_reducescatter(const char* name, const void* send, void* recv, int64_t count, int dtype, int op,
                                    int device, void* stream, dtrain_handle* handle);
/* send holds count x size elements, block j going to rank j; recv receives block i from rank i.
 * Out of place only. */
DTRAIN_API int dtrain_alltoall(const char* name, const void* send, void* recv, int64_t count, int dtype, int device,
                               void* stream, dtrain_handle* handle);
/* Done when every rank has submitted it. */
DTRAIN_API int dtrain_barrier(const char* name, dtrain_handle* handle);

/* --- completion -------------------------------------------------------------------------------- */
/* *done = 1 once the operation has finished (well or not; device buffers: on the GPU too); the
 * handle stays valid. */
DTRAIN_API int dtrain_poll(dtrain_handle handle, int* done);
/* Blocks until the operation has finished (device buffers: on the GPU too), returns its status
 * (its text in dtrain_last_error()) and releases the handle: a second wait is
 * DTRAIN_ERR_UNKNOWN_HANDLE. */
DTRAIN_API int dtrain_wait(dtrain_handle handle);
/* For device buffers: makes `stream` (a cudaStream_t; NULL: the legacy default stream) wait for
 * the operation without waiting for the GPU. Blocks only until the operation has been queued on
 * the library's stream (every rank has submitted it) and, where its collective crosses nodes
 * through host memory (hierarchical), until that cross-node step has run, whose failure is the
 * operation's; then releases the handle and returns its status. For a host operation it is
 * dtrain_wait. */
DTRAIN_API int dtrain_wait_stream(dtrain_handle handle, void* stream);
/* The finished operation's error text ("" when it succeeded or is still running), without
 * releasing it. Valid until the handle is waited. */
DTRAIN_API const char* dtrain_handle_error(dtrain_handle handle);

/* --- timeline ------------------------------------------------------------------------------- */
/* A Chrome trace (chrome://tracing, ui.perfetto.dev) of the named operations as rank 0 sees them:
 * per name, NEGOTIATE_<KIND> (first to last rank's submission), QUEUE, the collective (<KIND>,
 * with its fused group) and DONE. Written by rank 0 only (on the other ranks both calls do
 * nothing and succeed); `path` is created or truncated, and holds valid JSON once
 * dtrain_timeline_stop or dtrain_shutdown has closed it. DTRAIN_ERR_INVALID_ARGUMENT naming the
 * path when rank 0 cannot write it, or when a timeline is already being written. */
DTRAIN_API int dtrain_timeline_start(const char* path);
DTRAIN_API int dtrain_timeline_stop(void);

/* --- the job, for framework bindings ------------------------------------------------------- */
/* Ends every rank of the job now (MPI_Abort on MPI_COMM_WORLD with `exit_code`): what a binding
 * calls when its process fails while the other ranks may be waiting in a collective. Returns only
 * when MPI is not running (then DTRAIN_ERR_NOT_INITIALIZED; the caller exits by itself). */
DTRAIN_API int dtrain_abort(int exit_code);
/* This rank has no more work (Horovod's join): until every rank has joined, it adds zeros to the
 * all-reduces of host buffers that the other ranks submit (an average still divides by the world
 * size); any other operation submitted meanwhile fails, naming the joined ranks. Done when every rank
 * has joined; `last_rank` (may be NULL) then holds the rank that joined last. One join per rank may be
 * in flight. */
DTRAIN_API int dtrain_join(int* last_rank, dtrain_handle* handle);
/* Blocks until the operation has finished (a device operation: until it is queued on the library's
 * stream; a cross-node step staged through the host may still run, for dtrain_wait_stream to wait
 * for) or `timeout_seconds` (>= 0) have passed; *done says which.
 * The handle stays valid (dtrain_wait or dtrain_wait_stream releases it). For callers that must regain control now and
 * then while they wait (an interpreter that handles signals between calls). */
DTRAIN_API int dtrain_wait_for(dtrain_handle handle, double timeout_seconds, int* done);
/* 1 when this libdtrain.so was built with CUDA and NCCL (device buffers may be supported), else 0. */
DTRAIN_API int dtrain_cuda_built(void);

/* --- statistics ------------------------------------------------------------------------------- */
/* What fusion achieved on this rank since dtrain_init: `operations`, the named operations that every
 * rank submitted and this rank executed (well or not; mismatched and stalled ones are not counted),
 * and `collectives`, how many collectives they ran in (fused all-reduces count once, a barrier
 * counts one). Both are counted before the operations complete, so after dtrain_wait they include
 * the waited operation. Read-only; any thread. */
DTRAIN_API int dtrain_fusion_stats(int64_t* operations, int64_t* collectives);

#ifdef __cplusplus
}
#endif

#endif /* DTRAIN_DTRAIN_H_ */
