#include <isa-l/igzip_lib.h>
#include <stdint.h>
#include <stdlib.h>

// ISA-L's inflate state holds its buffers inline (about 50 KB); Swift sees it only through
// these functions, as an opaque pointer, set to read gzip members (header, deflate data and
// trailer, whose CRC-32 and length ISA-L checks).

static inline void *ckport_isal_gzip_new(void) {
    struct inflate_state *state = malloc(sizeof *state);
    if (state) {
        isal_inflate_init(state);
        state->crc_flag = ISAL_GZIP;
    }
    return state;
}

static inline void ckport_isal_free(void *state) { free(state); }

// Ready for the next member.
static inline void ckport_isal_gzip_reset(void *opaque) {
    struct inflate_state *state = opaque;
    isal_inflate_reset(state);
    state->crc_flag = ISAL_GZIP;
}

// Inflates from `input` into `output`: how many bytes of each were used, and whether the member
// ended (its trailer read and checked). Returns ISA-L's status (0, or negative for damage).
static inline int ckport_isal_inflate(void *opaque, const uint8_t *input, uint32_t inputCount, uint8_t *output, uint32_t outputCount,
                                      uint32_t *consumed, uint32_t *produced, int *ended) {
    struct inflate_state *state = opaque;
    state->next_in = (uint8_t *)input;
    state->avail_in = inputCount;
    state->next_out = output;
    state->avail_out = outputCount;
    int status = isal_inflate(state);
    *consumed = inputCount - state->avail_in;
    *produced = outputCount - state->avail_out;
    *ended = state->block_state == ISAL_BLOCK_FINISH;
    return status;
}
