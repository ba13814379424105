#include <isa-l/igzip_lib.h>
#include <stdint.h>
#include <stdlib.h>

// ISA-L's inflate state holds its buffers inline (about 87 KB); Swift sees it only through
// these functions, as an opaque pointer, set to read gzip members: the header, the deflate data
// and the trailer, whose CRC-32 and length ISA-L checks.
//
// The header is read here, with a header record that lives as long as the reader: isal_inflate
// reading it itself keeps that record on its stack for one call only, so a header that arrives
// in two reads (a name, an extra field or a header CRC across the cut) would lose what the
// first read learned.

// A header whose own CRC (FHCRC) does not match, told apart from a trailer's.
#define CKPORT_ISAL_HEADER_CHECKSUM (-100)

struct ckport_isal {
    struct inflate_state state;
    struct isal_gzip_header header;
};

static inline void ckport_isal_gzip_start(struct ckport_isal *reader) {
    isal_inflate_init(&reader->state);
    reader->state.crc_flag = ISAL_GZIP;
    isal_gzip_header_init(&reader->header);
    reader->header.flags = 0;
}

static inline void *ckport_isal_gzip_new(void) {
    struct ckport_isal *reader = calloc(1, sizeof *reader);
    if (reader) ckport_isal_gzip_start(reader);
    return reader;
}

static inline void ckport_isal_free(void *reader) { free(reader); }

// Ready for the next member.
static inline void ckport_isal_gzip_reset(void *opaque) {
    struct ckport_isal *reader = opaque;
    isal_inflate_reset(&reader->state);
    reader->state.crc_flag = ISAL_GZIP;
    isal_gzip_header_init(&reader->header);
    reader->header.flags = 0;
}

// Inflates from `input` into `output`: how many bytes of each were used, and whether the member
// ended (its trailer read and checked). Returns ISA-L's status: 0 or positive when all is well,
// negative for damage (ISAL_INVALID_WRAPPER too for header flags gzip reserves, as zlib does).
static inline int ckport_isal_inflate(void *opaque, const uint8_t *input, uint32_t inputCount, uint8_t *output, uint32_t outputCount,
                                      uint32_t *consumed, uint32_t *produced, int *ended) {
    struct ckport_isal *reader = opaque;
    struct inflate_state *state = &reader->state;
    state->next_in = (uint8_t *)input;
    state->avail_in = inputCount;
    state->next_out = output;
    state->avail_out = outputCount;
    *produced = 0;
    *ended = 0;
    if (!state->wrapper_flag) {
        int status = isal_read_gzip_header(state, &reader->header);
        *consumed = inputCount - state->avail_in;
        if (status == ISAL_INCORRECT_CHECKSUM) return CKPORT_ISAL_HEADER_CHECKSUM;
        if (status < 0) return status;
        if (status > 0) return ISAL_DECOMP_OK;  // the header goes on in the next input
        if (reader->header.flags & 0xE0) return ISAL_INVALID_WRAPPER;
    }
    int status = isal_inflate(state);
    *consumed = inputCount - state->avail_in;
    *produced = outputCount - state->avail_out;
    *ended = state->block_state == ISAL_BLOCK_FINISH;
    return status;
}
