/* The compiled scanner's contract with the Kineto reader. GENERATED from the table in
 * advisor/trace/kineto/schema.py by `python -m advisor.trace.kineto.cheader`: do not
 * edit (tests/trace/test_kscan_contract.py checks that it is up to date). */
#ifndef KSCAN_CONTRACT_H
#define KSCAN_CONTRACT_H

/* the contract's digest: the module's CONTRACT (kineto uses no other build) */
#define KSCAN_CONTRACT "df0fae4de1432fe5"

/* the event's keys read (the fields of kineto's Event) */
enum { K_PH, K_CAT, K_NAME, K_PID, K_TID, K_TS, K_DUR, K_ARGS, N_KEYS };
static const char *KEYS[N_KEYS] = {"ph", "cat", "name", "pid", "tid", "ts", "dur", "args"};

/* the args keys read (the fields of KernelArgs, CopyArgs, ApiArgs):
 * the numbers (the first N_NUM_ARGS), then the [x, y, z] lists */
enum { A_DEVICE, A_STREAM, A_CORRELATION, A_REGISTERS, A_SMEM, A_GRAPH_NODE, A_BYTES,
       A_GRID, A_BLOCK, N_ARGS };
#define N_NUM_ARGS 7
static const char *ARG_KEYS[N_ARGS] = {"device", "stream", "correlation",
    "registers per thread", "shared memory", "graph node id", "bytes", "grid", "block"};

/* the modes, a letter per category: read the args fields of a struct (a bit per A_
 * field), return the span of the raw args (raw), or leave the args alone */
#define BIT(f) (1u << (f))
typedef struct {
    char letter;
    unsigned args;
    int raw;
} Mode;
#define N_MODES 5
#define MODE_LETTERS "kcar-"
#define MODES_PROBLEM "modes: one of 'k', 'c', 'a', 'r', '-' per category"
static const Mode MODES[N_MODES] = {
    {'k', BIT(A_DEVICE) | BIT(A_STREAM) | BIT(A_CORRELATION) | BIT(A_REGISTERS) |
          BIT(A_SMEM) | BIT(A_GRAPH_NODE) | BIT(A_GRID) | BIT(A_BLOCK), 0}, /* KernelArgs */
    {'c', BIT(A_DEVICE) | BIT(A_STREAM) | BIT(A_CORRELATION) |
          BIT(A_BYTES), 0}, /* CopyArgs */
    {'a', BIT(A_CORRELATION), 0}, /* ApiArgs */
    {'r', 0, 1}, /* OpArgs: the raw args */
    {'-', 0, 0}, /* args not looked at */
};

/* the columns returned: cat (int8), name (int32), the int64 ones, the float64 ones */
#define CAT_COLUMN "cat"
#define NAME_COLUMN "name"
enum { C_START, C_DUR, C_ARGS_OFF, C_ARGS_LEN, N_INT_COLS };
static const char *INT_COLS[N_INT_COLS] = {"start", "dur", "args_off", "args_len"};
enum { F_PID, F_TID, F_DEVICE, F_STREAM, F_CORRELATION, F_REGISTERS, F_SMEM, F_GRAPH_NODE,
       F_BYTES, F_GRID_X, F_GRID_Y, F_GRID_Z, F_BLOCK_X, F_BLOCK_Y, F_BLOCK_Z, N_F_COLS };
#define F_FIRST_ARG F_DEVICE /* the numbers' columns, in A_ order */
static const char *F_COLS[N_F_COLS] = {"pid", "tid", "device", "stream", "correlation",
    "registers", "smem", "graph_node", "bytes", "grid_x", "grid_y", "grid_z", "block_x",
    "block_y", "block_z"};

/* the categories the reader asks for and their modes (the module's SCAN_CATEGORIES
 * and SCAN_MODES: a scan started before the reader's modules load uses them) */
#define N_SCAN_CATEGORIES 12
static const char *SCAN_CATEGORIES[N_SCAN_CATEGORIES] = {"kernel", "cuda_runtime",
    "cuda_driver", "gpu_memcpy", "gpu_memset", "user_annotation", "cpu_op", "Kernel",
    "Runtime", "Memcpy", "Memset", "Operator"};
#define SCAN_MODES "kaacc-rkaccr"

#endif
