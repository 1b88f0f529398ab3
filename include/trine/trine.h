/* trine.h: the embedded C API of trine, a CPU runtime for ternary and low-bit LLMs.
 *
 * Plain C99; includes only <stddef.h>, <stdint.h> and <stdbool.h> and exposes no internal type.
 * Link with libtrine.so (pkg-config: `trine`; CMake: `find_package(trine)` -> `trine::trine`).
 *
 * Conventions
 * - Handles are opaque: trine_model (immutable weights + vocabulary), trine_context (KV cache,
 *   logits: one inference stream), trine_sampler (sampling chain + RNG state).
 * - Params structs come from trine_*_default_params(), are passed by const pointer, and start with
 *   `size_t struct_size`, which must equal sizeof() of the struct the caller compiled against; any
 *   other value is TRINE_ERROR_INVALID_ARGUMENT.
 * - Functions returning trine_status give TRINE_OK (0) or a negative error. Functions returning a
 *   count give it (>= 0) or a negative trine_status. Constructors return NULL on error. On every
 *   error the calling thread's trine_last_status() and trine_last_error() describe it; they are
 *   not reset by successful calls. NULL handles and out-of-range arguments are errors, never
 *   crashes; no C++ exception and no abort crosses this API (allocation failures become
 *   TRINE_ERROR_OUT_OF_MEMORY).
 * - Text outputs (token_to_piece, detokenize, chat templates) are byte buffers: the return value
 *   is the length in bytes; when the buffer is too small nothing useful is written and the
 *   negated needed length is returned (llama.h's convention), so call again with a buffer of at
 *   least -ret bytes. A NUL byte follows the text when there is room for it (it is not counted).
 *
 * Thread safety (also noted per function)
 * - A model is immutable after trine_model_load: every function taking a const trine_model* may
 *   run concurrently from any number of threads, and contexts on one model may be used from
 *   different threads at the same time.
 * - A context, and a sampler, is used by one thread at a time (different contexts and samplers
 *   are independent).
 * - trine_log_set, trine_version and the default-params functions are safe from any thread.
 */
#ifndef TRINE_TRINE_H_
#define TRINE_TRINE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#if defined(TRINE_BUILDING_LIBRARY)
#define TRINE_API __declspec(dllexport)
#else
#define TRINE_API
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define TRINE_API __attribute__((visibility("default")))
#else
#define TRINE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define TRINE_VERSION_MAJOR 0
#define TRINE_VERSION_MINOR 1
#define TRINE_VERSION_PATCH 0

/* Status codes. TRINE_OK is 0; errors are negative. */
typedef enum trine_status {
  TRINE_OK = 0,
  TRINE_ERROR_INVALID_ARGUMENT = -1, /* NULL handle, bad value, wrong struct_size, bad token id */
  TRINE_ERROR_INVALID_FILE = -2,     /* malformed or unsupported model file */
  TRINE_ERROR_IO = -3,               /* open/read/mmap failed */
  TRINE_ERROR_UNSUPPORTED = -4,      /* valid input this build cannot handle */
  TRINE_ERROR_OUT_OF_MEMORY = -5,
  TRINE_ERROR_CANCELLED = -6,        /* a callback asked to stop (model load progress) */
  TRINE_ERROR_INTERNAL = -7,         /* a bug: please report it with trine_last_error() */
  TRINE_ERROR_BUFFER_TOO_SMALL = -8  /* set as last status when a size query returns -needed */
} trine_status;

typedef int32_t trine_token;
#define TRINE_TOKEN_NULL (-1)

/* Returned by trine_tokenize, trine_token_to_piece, trine_detokenize and the chat-template
 * functions for errors other than "buffer too small" (which returns -needed); the cause is in
 * trine_last_status() / trine_last_error(). */
#define TRINE_SIZE_ERROR INT32_MIN

typedef struct trine_model trine_model;
typedef struct trine_context trine_context;
typedef struct trine_sampler trine_sampler;

/* ---- Library, errors, logging ------------------------------------------------------------- */

/* "MAJOR.MINOR.PATCH" of the library (static storage). Thread-safe. */
TRINE_API const char* trine_version(void);

/* Short name of a status ("TRINE_ERROR_IO"); "unknown status" for other values. Thread-safe. */
TRINE_API const char* trine_status_string(trine_status status);

/* Message of the last error raised in the calling thread ("" when none). Thread-local; the
 * pointer is valid until the next failing trine_* call in this thread. */
TRINE_API const char* trine_last_error(void);
/* Status of the last error raised in the calling thread (TRINE_OK when none). Thread-local. */
TRINE_API trine_status trine_last_status(void);

typedef enum trine_log_level {
  TRINE_LOG_DEBUG = 0,
  TRINE_LOG_INFO = 1,
  TRINE_LOG_WARN = 2,
  TRINE_LOG_ERROR = 3
} trine_log_level;

/* Receives one message (no trailing newline) per call; may be called from any thread that calls
 * into trine. */
typedef void (*trine_log_callback)(trine_log_level level, const char* message, void* user_data);

/* Installs the process-wide log sink. NULL restores the default, which writes WARN and ERROR
 * messages to stderr as "trine: warning: ..." and drops the rest. A callback receives every
 * level. Errors returned by calls are not logged (they are in trine_last_error()). Thread-safe;
 * a message being delivered concurrently may still reach the previous sink. */
TRINE_API void trine_log_set(trine_log_callback callback, void* user_data);

/* ---- Model -------------------------------------------------------------------------------- */

/* Load progress in [0, 1]; return false to cancel the load (trine_model_load then returns NULL
 * with TRINE_ERROR_CANCELLED). Called on the loading thread. When auto_plan makes a profile at
 * load, the profile reports through it too: a second pass from 0 to 1 after the load's (it can
 * be cancelled the same way). */
typedef bool (*trine_progress_callback)(float progress, void* user_data);

/* KV cache precisions (llama.cpp's -ctk / -ctv types). Q8_0 and Q4_0 store 32-value blocks and
 * need a head size that is a multiple of 32 (trine_context_create fails otherwise); F32 is only
 * valid for K and V together. */
typedef enum trine_kv_type {
  TRINE_KV_SAME = -1, /* kv_type_v only: the same as kv_type */
  TRINE_KV_F16 = 0,
  TRINE_KV_F32 = 1,
  TRINE_KV_Q8_0 = 2,
  TRINE_KV_Q4_0 = 3
} trine_kv_type;

typedef struct trine_model_params {
  size_t struct_size;                        /* sizeof(trine_model_params) */
  trine_progress_callback progress_callback; /* NULL: none */
  void* progress_user_data;
  bool use_mmap;                             /* map the file (default) or read it into memory */
  /* Memory plan (README, "Profiling and plans"). A plan applies when mem_budget_bytes, plan_path
   * or auto_plan is set: each layer is then resident (prefaulted), page cache (mapped) or streamed
   * (never mapped; read with pread into a ring of two layer-sized buffers per context, the next
   * layer read while the current one computes), and each weight matrix gets the plan's activation
   * precision. Resolution: plan_path; else the plan cache (keyed by the file's content hash, the
   * budget and plan_n_ctx; written by `trine profile` or auto_plan); else with auto_plan a
   * profile at load (slow on large models: it runs the model many times); else a budget-only plan
   * (no profile; every layer int8, layers placed in order). The hash reads the whole file once.
   * Streaming needs use_mmap (TRINE_ERROR_UNSUPPORTED otherwise). */
  uint64_t mem_budget_bytes; /* 0: no budget (with auto_plan: the available memory) */
  const char* plan_path;     /* NULL: none; a plan file (`trine profile --plan-out`) for this model */
  bool auto_plan;            /* profile when no cached plan matches */
  bool no_plan_cache;        /* ignore cached plans (a profile still refreshes the cache) */
  bool mlock;                /* mlock resident layers (failures are not errors) */
  int32_t plan_n_ctx;        /* context the plan budgets the KV cache for; 0: the training
                                context, at most 4096 (match trine_context_params.n_ctx) */
  int32_t plan_n_threads;    /* threads of a profile at load; 0: all cores */
  /* Appended in 0.1 after plan_n_threads (in what was padding: sizeof is unchanged, so take the
   * struct from trine_model_default_params()): the KV cache type the plan budgets for and
   * profiles with; match trine_context_params.kv_type. TRINE_KV_SAME is not allowed here. */
  trine_kv_type plan_kv_type;
} trine_model_params;

/* Defaults: no progress callback, use_mmap = true, no plan (mem_budget_bytes 0, plan_path NULL,
 * auto_plan false, no_plan_cache false, mlock false, plan_n_ctx 0, plan_n_threads 0, plan_kv_type
 * TRINE_KV_F16). Thread-safe. */
TRINE_API trine_model_params trine_model_default_params(void);

/* Loads and validates a GGUF model (llama, bitnet, bitnet-b1.58 architectures). Where the system
 * has transparent huge pages (and TRINE_HUGE_PAGES is not 0), the model then moves its weight
 * copies onto huge pages from a background thread it owns (a few seconds; decode may run
 * meanwhile and speeds up as it goes); trine_model_free stops it.
 * @param path    file path (split files are followed from the first part)
 * @param params  from trine_model_default_params(); not NULL
 * @return a model owned by the caller (free with trine_model_free), or NULL: see
 *         trine_last_status() (INVALID_ARGUMENT, INVALID_FILE, IO, UNSUPPORTED, OUT_OF_MEMORY,
 *         CANCELLED). Thread-safe (loads of different models may run at once). */
TRINE_API trine_model* trine_model_load(const char* path, const trine_model_params* params);

/* Releases the caller's reference. Contexts created on the model keep its weights alive, so a
 * model may be freed before its contexts; no other call may use `model` afterwards. NULL is a
 * no-op. Must not race with other calls on the same handle.
 * Freeing a handle twice, or a pointer that is not a live handle of this type, is detected by all
 * three *_free functions: it is ignored, logged, and sets INVALID_ARGUMENT as the last status.
 * (Any other call on a freed handle is undefined.) */
TRINE_API void trine_model_free(trine_model* model);

/* One line describing the memory plan applied at load ("plan: layers 2 resident / 0 page cache /
 * 28 streamed ...; budget only ..."), or "" when none was requested. Owned by the model, valid
 * until trine_model_free; NULL for a NULL model (error set). Thread-safe. */
TRINE_API const char* trine_model_plan_summary(const trine_model* model);

/* Model facts. Thread-safe. A NULL model gives TRINE_ERROR_INVALID_ARGUMENT (negative) for the
 * int32_t getters, 0 for the uint64_t ones and NULL for the strings. */
TRINE_API int32_t trine_model_n_vocab(const trine_model* model);     /* rows of the logits */
TRINE_API int32_t trine_model_n_ctx_train(const trine_model* model); /* training context */
TRINE_API int32_t trine_model_n_embd(const trine_model* model);
TRINE_API int32_t trine_model_n_layer(const trine_model* model);
TRINE_API uint64_t trine_model_size(const trine_model* model);     /* bytes of all tensors */
TRINE_API uint64_t trine_model_n_params(const trine_model* model); /* elements of all tensors */
/* general.architecture, e.g. "llama" or "bitnet". Owned by the model, valid until trine_model_free. */
TRINE_API const char* trine_model_arch(const trine_model* model);
/* One line, e.g. "llama 4.5M params, 4 layers, n_embd 256, mostly TQ2_0" (the type of most bytes
 * among the layers' matrices). Owned by the model, valid until trine_model_free. */
TRINE_API const char* trine_model_desc(const trine_model* model);

/* Special tokens; TRINE_TOKEN_NULL when the model has none (or model is NULL, which also sets
 * the last error). Thread-safe. */
TRINE_API trine_token trine_model_token_bos(const trine_model* model);
TRINE_API trine_token trine_model_token_eos(const trine_model* model);
TRINE_API trine_token trine_model_token_eot(const trine_model* model);
/* True when `token` ends generation (eos, eot and the other end-of-generation controls). False
 * for a NULL model (error set) or an id out of range. Thread-safe. */
TRINE_API bool trine_model_token_is_eog(const trine_model* model, trine_token token);
/* True when the vocabulary asks for BOS at the start of a text (tokenize's add_special adds it
 * then). Thread-safe. */
TRINE_API bool trine_model_add_bos(const trine_model* model);

/* ---- Tokenizer ---------------------------------------------------------------------------- */

/* Converts text to token ids.
 * @param text, text_len  UTF-8 bytes (bad UTF-8 never fails); text_len < 0 means strlen(text).
 *                        text may be NULL only when text_len is 0.
 * @param tokens, n_tokens_max  output; tokens may be NULL when n_tokens_max is 0 (size query)
 * @param add_special     add BOS (and EOS) as the vocabulary asks
 * @param parse_special   turn control-token texts such as "<|eot_id|>" into those tokens
 * @return the number of tokens written; -(needed) when n_tokens_max is too small (last status
 *         TRINE_ERROR_BUFFER_TOO_SMALL, nothing useful written); TRINE_SIZE_ERROR on other errors.
 * Thread-safe. */
TRINE_API int32_t trine_tokenize(const trine_model* model, const char* text, int32_t text_len,
                                 trine_token* tokens, int32_t n_tokens_max, bool add_special,
                                 bool parse_special);

/* The text of one token (SPM "\xe2\x96\x81" shown as a space, byte tokens as the byte). Control
 * tokens give "" unless render_special.
 * @return bytes written (not NUL-terminated unless there is room); -(needed) when size is too
 *         small; TRINE_SIZE_ERROR for a NULL model, an id out of range or buf NULL with size > 0.
 * Thread-safe. */
TRINE_API int32_t trine_token_to_piece(const trine_model* model, trine_token token, char* buf,
                                       int32_t size, bool render_special);

/* The text of a token sequence, as llama_detokenize (leading space of SPM text dropped).
 * remove_special drops a leading BOS / trailing EOS the vocabulary adds.
 * @return as trine_token_to_piece. Thread-safe. */
TRINE_API int32_t trine_detokenize(const trine_model* model, const trine_token* tokens,
                                   int32_t n_tokens, char* buf, int32_t size, bool remove_special,
                                   bool render_special);

/* ---- Context ------------------------------------------------------------------------------ */

typedef struct trine_context_params {
  size_t struct_size;    /* sizeof(trine_context_params) */
  int32_t n_ctx;         /* positions in the KV cache; 0: the model's training context, <= 4096 */
  int32_t n_batch;       /* tokens per forward pass (longer inputs are split); > 0 */
  int32_t n_threads;     /* OpenMP threads of this context; 0: all cores */
  trine_kv_type kv_type; /* K cache precision (and V's when kv_type_v is TRINE_KV_SAME) */
  /* Appended in 0.1 after kv_type; a struct_size of offsetof(trine_context_params, kv_type_v)
   * (the earlier layout) is accepted and means TRINE_KV_SAME. */
  trine_kv_type kv_type_v; /* V cache precision, or TRINE_KV_SAME */
  /* Appended in 0.1 after kv_type_v; the earlier layouts (struct_size 24 or 32 on LP64) are
   * accepted and mean n_seq_max 1, kv_pool_size 0, fixed_threads false. */
  int32_t n_seq_max;    /* sequences the context holds at once (ids 0 .. n_seq_max - 1); >= 1 */
  int32_t kv_pool_size; /* positions of the KV pool all sequences share (blocks of 16); 0: n_ctx.
                           Each sequence still holds at most n_ctx positions. */
  bool fixed_threads;   /* false (default): a pass may run on fewer threads than n_threads when
                           that measures faster (cores busy with other work); true: n_threads */
} trine_context_params;

/* Defaults: n_ctx 0, n_batch 512, n_threads 0, TRINE_KV_F16, kv_type_v TRINE_KV_SAME, n_seq_max 1,
 * kv_pool_size 0, fixed_threads false.
 * Thread-safe. */
TRINE_API trine_context_params trine_context_default_params(void);

/* Creates an inference stream on `model` (which it keeps alive; see trine_model_free).
 * Logs a warning when n_ctx exceeds the training context.
 * @return a context owned by the caller, or NULL (INVALID_ARGUMENT, OUT_OF_MEMORY).
 * Thread-safe with respect to the model (contexts may be created concurrently). */
TRINE_API trine_context* trine_context_create(trine_model* model,
                                              const trine_context_params* params);
/* NULL is a no-op; a double free is detected (see trine_model_free). The context must not be in
 * use by another thread. */
TRINE_API void trine_context_free(trine_context* ctx);

/* Evaluates n_tokens tokens at positions n_past .. n_past + n_tokens - 1 and appends them to the
 * KV cache. With all_logits every token's logits are kept (rows 0 .. n_tokens - 1), otherwise
 * only the last token's (row 0).
 * @return TRINE_OK; INVALID_ARGUMENT for NULL, n_tokens <= 0, an id out of range or a batch that
 *         does not fit in the context (the cache is then unchanged). One thread at a time. */
TRINE_API trine_status trine_context_decode(trine_context* ctx, const trine_token* tokens,
                                            int32_t n_tokens, bool all_logits);

/* Logits (n_vocab floats) of row i of the last trine_context_decode; i = -1 is the last row.
 * @return a pointer owned by the context, valid until the next decode, kv_clear, kv_trim or
 *         trine_context_free; NULL (error set) when i is out of range or nothing was decoded
 *         since the last kv_clear / kv_trim. One thread at a time. */
TRINE_API const float* trine_context_get_logits(trine_context* ctx, int32_t i);

/* Positions held in the KV cache, and its capacity. Negative status for a NULL ctx. */
TRINE_API int32_t trine_context_n_past(const trine_context* ctx);
TRINE_API int32_t trine_context_n_ctx(const trine_context* ctx);
/* Threads the context runs with (n_threads resolved). */
TRINE_API int32_t trine_context_n_threads(const trine_context* ctx);

/* Forgets every position (n_past becomes 0) / every position >= n (0 <= n <= n_past), for
 * multi-turn use or to rewind. Both drop the current logits. One thread at a time. */
TRINE_API trine_status trine_context_kv_clear(trine_context* ctx);
TRINE_API trine_status trine_context_kv_trim(trine_context* ctx, int32_t n);

/* ---- Several sequences in one context ------------------------------------------------------
 * A context holds up to n_seq_max sequences in one paged KV pool of kv_pool_size positions: blocks
 * of 16 positions are taken as a sequence grows and returned when it shrinks, and a forked prefix
 * shares its blocks until one of the sequences writes into one (it is then copied). The calls
 * above (trine_context_decode, n_past, kv_clear, kv_trim, trine_generate) act on sequence 0.
 * A batch carries tokens of several sequences (llama.cpp's llama_batch): one
 * trine_context_decode_batch evaluates them in one forward pass, so every weight matrix is read
 * once for all of them, and each token attends to its own sequence only. The logits of a sequence
 * are those it gets decoded alone (see docs/engine.md for which paths give the same bits). */
typedef struct trine_batch trine_batch;
/* A batch with room for n_tokens_max (> 0) tokens, or NULL (INVALID_ARGUMENT, OUT_OF_MEMORY). */
TRINE_API trine_batch* trine_batch_init(int32_t n_tokens_max);
/* NULL is a no-op; a double free is detected (see trine_model_free). */
TRINE_API void trine_batch_free(trine_batch* batch);
/* Appends a token of sequence seq_id at position pos (-1: where the sequence continues; a
 * sequence's tokens continue its positions in order). logits: keep this token's logits.
 * @return TRINE_OK; INVALID_ARGUMENT for a NULL batch, a full batch, seq_id < 0 or pos < -1. */
TRINE_API trine_status trine_batch_add(trine_batch* batch, trine_token token, int32_t pos, int32_t seq_id,
                                       bool logits);
/* Empties the batch (its capacity stays). */
TRINE_API trine_status trine_batch_clear(trine_batch* batch);
/* Tokens in the batch, or a negative status for NULL. */
TRINE_API int32_t trine_batch_n_tokens(const trine_batch* batch);
/* Evaluates the batch (split in n_batch pieces when longer) and appends each token to its
 * sequence's KV cache.
 * @return TRINE_OK; INVALID_ARGUMENT for NULL, an empty batch, a token id, sequence id
 *         (>= n_seq_max) or position out of range, a sequence that would exceed n_ctx;
 *         OUT_OF_MEMORY ("KV pool full") when the pool has too few free blocks. On any error no
 *         sequence changes. One thread at a time. */
TRINE_API trine_status trine_context_decode_batch(trine_context* ctx, const trine_batch* batch);
/* Logits of token i of the last decoded batch (it must have asked for them); i = -1: the last
 * token that did. After trine_context_decode, i indexes its tokens the same way. Valid as for
 * trine_context_get_logits; NULL (error set) otherwise. */
TRINE_API const float* trine_context_get_logits_ith(trine_context* ctx, int32_t i);
/* Positions held by sequence seq_id, or a negative status (NULL ctx, seq_id out of range). */
TRINE_API int32_t trine_context_seq_pos(const trine_context* ctx, int32_t seq_id);
/* Removes positions [p0, p1) of sequence seq_id (p0 < 0: 0; p1 < 0: to the end) and returns the
 * blocks it no longer uses to the pool. Only a tail can be removed (p1 < 0 or p1 >= its positions;
 * UNSUPPORTED otherwise): seq_rm(ctx, s, 0, -1) frees the whole sequence. Unlike kv_trim, seq_rm
 * and seq_fork keep the last decode's logits (another sequence's row can still be sampled). */
TRINE_API trine_status trine_context_seq_rm(trine_context* ctx, int32_t seq_id, int32_t p0, int32_t p1);
/* Sequence dst drops what it held and becomes the first n_pos positions of src (-1: all of them),
 * sharing its blocks: a common prompt is computed once. INVALID_ARGUMENT for ids out of range,
 * src == dst, or n_pos beyond src's positions. */
TRINE_API trine_status trine_context_seq_fork(trine_context* ctx, int32_t src, int32_t dst, int32_t n_pos);
/* n_seq_max; the pool's size and its free part, in positions (16 per block); negative status for
 * a NULL ctx. */
TRINE_API int32_t trine_context_n_seq_max(const trine_context* ctx);
TRINE_API int32_t trine_context_kv_pool_size(const trine_context* ctx);
TRINE_API int32_t trine_context_kv_pool_free(const trine_context* ctx);

/* ---- Sampler ------------------------------------------------------------------------------ */

/* The chain follows llama.cpp's default order: repetition penalty -> top-k -> top-p -> min-p ->
 * temperature -> seeded draw. temp <= 0 is greedy (argmax, lowest id on ties). */
typedef struct trine_sampler_params {
  size_t struct_size;   /* sizeof(trine_sampler_params) */
  float temp;           /* >= 0; 0: greedy */
  int32_t top_k;        /* <= 0: off */
  float top_p;          /* (0, 1]; 1: off */
  float min_p;          /* [0, 1]; 0: off */
  float repeat_penalty; /* > 0; 1: off */
  int32_t repeat_last_n; /* history window of the penalty, >= 0 */
  uint64_t seed;        /* RNG seed: equal seeds give equal draws */
  /* OpenAI's penalties, after repeat_penalty as llama.cpp applies them: a token seen c > 0 times in
   * the last repeat_last_n tokens loses c * frequency_penalty + presence_penalty. [-2, 2]; 0: off.
   * (Appended: a struct_size without them, sizeof up to seed, is still accepted as both 0.) */
  float presence_penalty;
  float frequency_penalty;
} trine_sampler_params;

/* Defaults: temp 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1, repeat_last_n 64,
 * seed 0xC0FFEE, presence_penalty 0, frequency_penalty 0. Thread-safe. */
TRINE_API trine_sampler_params trine_sampler_default_params(void);
/* @return a sampler owned by the caller, or NULL (INVALID_ARGUMENT naming the bad field). */
TRINE_API trine_sampler* trine_sampler_create(const trine_sampler_params* params);
/* NULL is a no-op; a double free is detected (see trine_model_free). */
TRINE_API void trine_sampler_free(trine_sampler* sampler);

/* Picks a token from row i of ctx's logits (i = -1: the last row). Does not accept it.
 * @return the token id (>= 0) or a negative trine_status. One thread at a time per sampler and
 * per context. */
TRINE_API trine_token trine_sampler_sample(trine_sampler* sampler, trine_context* ctx, int32_t i);
/* As trine_sampler_sample, over caller-owned logits (n_vocab floats, e.g. after editing). */
TRINE_API trine_token trine_sampler_sample_logits(trine_sampler* sampler, const float* logits,
                                                  int32_t n_vocab);
/* Records a token (prompt or generated) in the repetition-penalty history. */
TRINE_API trine_status trine_sampler_accept(trine_sampler* sampler, trine_token token);
/* Clears the history and reseeds the RNG with the params' seed. */
TRINE_API trine_status trine_sampler_reset(trine_sampler* sampler);

/* ---- Generation --------------------------------------------------------------------------- */

/* Receives each generated token: its text (`piece`, `piece_len` bytes, NUL-terminated, valid
 * during the call) and id. Return false to stop after this token. */
typedef bool (*trine_token_callback)(const char* piece, size_t piece_len, trine_token token,
                                     void* user_data);

/* Convenience loop: tokenizes `prompt` (BOS added as the vocabulary asks when the context is
 * empty; control-token texts are not parsed), accepts its tokens into the sampler, evaluates it,
 * then repeats: sample -> stop on an end-of-generation token -> accept -> evaluate -> callback.
 * Every token passed to the callback is in the KV cache afterwards, so a later call continues
 * the text, except when the context fills up: then the last token is passed to the callback
 * without being evaluated and generation stops.
 * @param prompt     text to append first; "" (or NULL) continues from the current logits
 * @param n_predict  at most this many tokens; < 0: until end-of-generation or a full context
 * @param callback   may be NULL
 * @return the number of tokens generated (>= 0) or a negative trine_status. One thread at a time
 * per context and sampler. */
TRINE_API int32_t trine_generate(trine_context* ctx, trine_sampler* sampler, const char* prompt,
                                 int32_t n_predict, trine_token_callback callback,
                                 void* user_data);

/* ---- Chat templates ----------------------------------------------------------------------- */

typedef struct trine_chat_message {
  const char* role;    /* "system", "user" or "assistant" */
  const char* content;
} trine_chat_message;

/* Renders a conversation with a chat template: the model's own Jinja tokenizer.chat_template
 * (rendered as Hugging Face's transformers renders it), a built-in format by name, or a Jinja
 * template given as text.
 * @param model  may be NULL when tmpl is given; gives bos_token / eos_token to the template
 * @param tmpl   NULL for the model's own template (chatml when the file has none); a built-in's
 *               name ("chatml", "llama3", "llama2", "bitnet"); or a Jinja template's text
 *               (anything containing "{{" or "{%")
 * @param add_assistant  open the assistant's turn at the end (add_generation_prompt)
 * @return bytes of the text, or -(needed) when size is too small, or TRINE_SIZE_ERROR
 *         (INVALID_ARGUMENT for an unknown name, a NULL or unknown role, NULL content, a template
 *         that does not parse or that refuses the conversation -- its raise_exception() message --
 *         and UNSUPPORTED for a model template trine cannot render; the message names the
 *         construct).
 * To render one turn of a running chat, render the conversation before and after it and send
 * the new tail. Thread-safe. */
TRINE_API int32_t trine_chat_apply_template(const trine_model* model, const char* tmpl,
                                            const trine_chat_message* messages, size_t n_messages,
                                            bool add_assistant, char* buf, int32_t size);

/* Canonical name of the template trine_chat_apply_template would use for (model, tmpl): "jinja"
 * for a Jinja template, else the built-in's name, e.g. "llama3"; static storage. NULL on error (as trine_chat_apply_template). Thread-safe. */
TRINE_API const char* trine_chat_template_name(const trine_model* model, const char* tmpl);

/* The text the template writes after an assistant reply (e.g. "<|im_end|>\n"), to close a turn
 * whose reply was generated into the KV cache. Returns as trine_chat_apply_template. */
TRINE_API int32_t trine_chat_end_of_turn(const trine_model* model, const char* tmpl, char* buf,
                                         int32_t size);

#ifdef __cplusplus
}
#endif

#endif /* TRINE_TRINE_H_ */
