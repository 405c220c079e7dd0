"""Builds :mod:`replicator.core.kafka._arrow_reader`, the C halves of
:mod:`replicator.core.kafka.arrow_reads` (``arrow_reader.c``: a partition read into Arrow
columns) and :mod:`replicator.core.kafka.arrow_produce` (``arrow_producer.c``: Arrow columns
produced), with cffi (API mode): ``make setup`` runs
``python -m replicator.core.kafka.arrow_reader_build``.

It links against the librdkafka that confluent-kafka's wheel bundles (the one the rest of
the project's clients run on), so no other Kafka client is installed and both share one
library in a process. The wheel carries no C headers: the declarations below are the
subset of librdkafka's public API the reader calls, which librdkafka keeps ABI-stable
(``rd_kafka_message_t``'s layout and the functions' signatures are unchanged since 1.0).
A newer confluent-kafka wheel names its library differently: a ``make setup`` after the
upgrade builds the reader again.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import shutil
import sys
import tempfile
from pathlib import Path

from cffi import FFI

log = logging.getLogger(__name__)

MODULE = "replicator.core.kafka._arrow_reader"
HERE = Path(__file__).parent
C_SOURCES = (HERE / "arrow_reader.c", HERE / "arrow_producer.c")

RDKAFKA_SUBSET = """
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
typedef struct rd_kafka_queue_s rd_kafka_queue_t;
typedef struct rd_kafka_headers_s rd_kafka_headers_t;
typedef struct rd_kafka_topic_s rd_kafka_topic_t;
typedef struct rd_kafka_topic_partition_s rd_kafka_topic_partition_t;
typedef struct rd_kafka_topic_partition_list_s rd_kafka_topic_partition_list_t;
typedef struct rd_kafka_topic_conf_s rd_kafka_topic_conf_t;
typedef struct rd_kafka_error_s rd_kafka_error_t;
typedef int rd_kafka_resp_err_t;
#define RD_KAFKA_RESP_ERR_NO_ERROR 0
#define RD_KAFKA_RESP_ERR__BAD_MSG (-199)
#define RD_KAFKA_RESP_ERR__INVALID_ARG (-186)
#define RD_KAFKA_MSG_F_COPY 0x2
typedef enum rd_kafka_vtype_t {
    RD_KAFKA_VTYPE_END,
    RD_KAFKA_VTYPE_TOPIC,
    RD_KAFKA_VTYPE_RKT,
    RD_KAFKA_VTYPE_PARTITION,
    RD_KAFKA_VTYPE_VALUE,
    RD_KAFKA_VTYPE_KEY,
    RD_KAFKA_VTYPE_OPAQUE,
    RD_KAFKA_VTYPE_MSGFLAGS,
    RD_KAFKA_VTYPE_TIMESTAMP,
    RD_KAFKA_VTYPE_HEADER,
    RD_KAFKA_VTYPE_HEADERS
} rd_kafka_vtype_t;
typedef struct rd_kafka_vu_s {
    rd_kafka_vtype_t vtype;
    union {
        const char *cstr;
        rd_kafka_topic_t *rkt;
        int i;
        int32_t i32;
        int64_t i64;
        struct { void *ptr; size_t size; } mem;
        struct { const char *name; const void *val; ssize_t size; } header;
        rd_kafka_headers_t *headers;
        void *ptr;
        char _pad[64];
    } u;
} rd_kafka_vu_t;
typedef enum { RD_KAFKA_PRODUCER, RD_KAFKA_CONSUMER } rd_kafka_type_t;
typedef enum {
    RD_KAFKA_CONF_UNKNOWN = -2, RD_KAFKA_CONF_INVALID = -1, RD_KAFKA_CONF_OK = 0
} rd_kafka_conf_res_t;
typedef enum {
    RD_KAFKA_TIMESTAMP_NOT_AVAILABLE,
    RD_KAFKA_TIMESTAMP_CREATE_TIME,
    RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME
} rd_kafka_timestamp_type_t;
typedef struct rd_kafka_message_s {
    rd_kafka_resp_err_t err;
    rd_kafka_topic_t *rkt;
    int32_t partition;
    void *payload;
    size_t len;
    void *key;
    size_t key_len;
    int64_t offset;
    void *_private;
} rd_kafka_message_t;

rd_kafka_conf_t *rd_kafka_conf_new(void);
void rd_kafka_conf_destroy(rd_kafka_conf_t *conf);
rd_kafka_conf_res_t rd_kafka_conf_set(rd_kafka_conf_t *conf, const char *name,
                                      const char *value, char *errstr, size_t errstr_size);
void rd_kafka_conf_set_log_cb(rd_kafka_conf_t *conf,
                              void (*log_cb)(const rd_kafka_t *rk, int level,
                                             const char *fac, const char *buf));
rd_kafka_t *rd_kafka_new(rd_kafka_type_t type, rd_kafka_conf_t *conf, char *errstr,
                         size_t errstr_size);
void rd_kafka_destroy(rd_kafka_t *rk);
const char *rd_kafka_name(const rd_kafka_t *rk);
rd_kafka_resp_err_t rd_kafka_poll_set_consumer(rd_kafka_t *rk);
rd_kafka_queue_t *rd_kafka_queue_get_consumer(rd_kafka_t *rk);
void rd_kafka_queue_destroy(rd_kafka_queue_t *rkqu);
rd_kafka_resp_err_t rd_kafka_consumer_close(rd_kafka_t *rk);
rd_kafka_topic_partition_list_t *rd_kafka_topic_partition_list_new(int size);
void rd_kafka_topic_partition_list_destroy(rd_kafka_topic_partition_list_t *rkparlist);
rd_kafka_topic_partition_t *rd_kafka_topic_partition_list_add(
    rd_kafka_topic_partition_list_t *rktparlist, const char *topic, int32_t partition);
rd_kafka_resp_err_t rd_kafka_topic_partition_list_set_offset(
    rd_kafka_topic_partition_list_t *rktparlist, const char *topic, int32_t partition,
    int64_t offset);
rd_kafka_resp_err_t rd_kafka_assign(rd_kafka_t *rk,
                                    const rd_kafka_topic_partition_list_t *partitions);
rd_kafka_resp_err_t rd_kafka_query_watermark_offsets(rd_kafka_t *rk, const char *topic,
                                                     int32_t partition, int64_t *low,
                                                     int64_t *high, int timeout_ms);
ssize_t rd_kafka_consume_batch_queue(rd_kafka_queue_t *rkqu, int timeout_ms,
                                     rd_kafka_message_t **rkmessages, size_t rkmessages_size);
void rd_kafka_message_destroy(rd_kafka_message_t *rkmessage);
const char *rd_kafka_message_errstr(const rd_kafka_message_t *rkmessage);
int64_t rd_kafka_message_timestamp(const rd_kafka_message_t *rkmessage,
                                   rd_kafka_timestamp_type_t *tstype);
rd_kafka_resp_err_t rd_kafka_message_headers(const rd_kafka_message_t *rkmessage,
                                             rd_kafka_headers_t **hdrsp);
rd_kafka_resp_err_t rd_kafka_header_get_all(const rd_kafka_headers_t *hdrs, size_t idx,
                                            const char **namep, const void **valuep,
                                            size_t *sizep);
rd_kafka_resp_err_t rd_kafka_header_get_last(const rd_kafka_headers_t *hdrs,
                                             const char *name, const void **valuep,
                                             size_t *sizep);
rd_kafka_resp_err_t rd_kafka_last_error(void);
const char *rd_kafka_err2str(rd_kafka_resp_err_t err);
void *rd_kafka_opaque(const rd_kafka_t *rk);
rd_kafka_topic_t *rd_kafka_topic_new(rd_kafka_t *rk, const char *topic,
                                     rd_kafka_topic_conf_t *conf);
void rd_kafka_topic_destroy(rd_kafka_topic_t *rkt);
rd_kafka_headers_t *rd_kafka_headers_new(size_t initial_count);
void rd_kafka_headers_destroy(rd_kafka_headers_t *hdrs);
rd_kafka_resp_err_t rd_kafka_header_add(rd_kafka_headers_t *hdrs, const char *name,
                                        ssize_t name_size, const void *value,
                                        ssize_t value_size);
rd_kafka_error_t *rd_kafka_produceva(rd_kafka_t *rk, const rd_kafka_vu_t *vus, size_t cnt);
rd_kafka_resp_err_t rd_kafka_error_code(const rd_kafka_error_t *error);
void rd_kafka_error_destroy(rd_kafka_error_t *error);

static void ar_log(const void *rk, int level, const char *fac, const char *buf);
"""

SHARED_TYPES = """
struct ar_buffer {
    unsigned char *data;
    size_t len;
    size_t cap;
    size_t hint;  /* the capacity the last detached data had: the next one starts there */
};
/* A binary column: offsets (int32, one per element and one more), data and validity. */
struct ar_binary { struct ar_buffer offsets, data, validity; int64_t count, nulls; };
/* One read's records, column by column, and where and why it stopped. */
struct ar_batch {
    int64_t count;
    struct ar_buffer offsets, timestamps, timestamp_types, header_counts;
    struct ar_binary keys, values, header_keys, header_values;
    int32_t error;
    int64_t error_offset;
    char error_text[512];
    int64_t position;
    int done;
};
/* A binary or string Arrow array handed to the C producer: element i is
 * data[offsets[i] .. offsets[i + 1]), null where validity's bit validity_offset + i is 0
 * (no validity: no nulls). `offsets` already points at the array's first element. */
struct ap_binary {
    const uint8_t *validity;
    int64_t validity_offset;
    const int32_t *offsets;
    const uint8_t *data;
};
/* The records of a slice, column by column, each pointer at the slice's first record:
 * record i's headers are entries header_bounds[i] .. header_bounds[i + 1] of
 * header_keys and header_values. */
struct ap_records {
    const int64_t *offsets;
    const int64_t *timestamps;
    const int8_t *timestamp_types;
    struct ap_binary keys, values;
    const int32_t *header_bounds;
    struct ap_binary header_keys, header_values;
};
"""
"""The structures both the C reader fills and Python reads: declared once, given to cffi
and put ahead of the C source."""

CDEF = (
    SHARED_TYPES
    + """
struct ar_reader;

int64_t ap_produce(void *rk, const char *topic, int32_t partition, const struct ap_records *r,
                   int64_t from, int64_t to, const char *provenance_name, const char *prefix,
                   size_t prefix_len, int32_t *error, int64_t *largest);
void *ap_client_opaque(void *rk);

struct ar_reader *ar_open(const char **names, const char **values, int count, int with_log,
                          char *errstr, size_t errstr_size);
int ar_assign(struct ar_reader *r, const char *topic, int32_t partition, int64_t offset);
int ar_watermarks(struct ar_reader *r, const char *topic, int32_t partition, int timeout_ms,
                  int64_t *low, int64_t *high);
const char *ar_client_name(const void *rk);
int ar_utf8_valid(const char *bytes, size_t n);
unsigned char *ar_detach(struct ar_buffer *b);
void free(void *);
void ar_close(struct ar_reader *r);
struct ar_batch *ar_batch_new(void);
void ar_batch_free(struct ar_batch *b);
int ar_read(struct ar_reader *r, struct ar_batch *b, int most, int timeout_ms, int64_t position,
            int64_t end, const char *skip_header, size_t most_bytes, int eager);

extern "Python" void ar_log(const void *rk, int level, const char *fac, const char *buf);
"""
)


def bundled_librdkafka() -> Path:
    """The librdkafka shared library inside confluent-kafka's wheel."""
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is None or spec.origin is None:
        raise RuntimeError("confluent-kafka is not installed")
    libs = Path(spec.origin).parent.parent / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka*.so*"))
    if not found:
        raise RuntimeError(f"no librdkafka in {libs}: is confluent-kafka a wheel from PyPI?")
    return found[0]


def builder() -> FFI:
    library = bundled_librdkafka()
    ffibuilder = FFI()
    ffibuilder.cdef(CDEF)
    ffibuilder.set_source(
        MODULE,
        RDKAFKA_SUBSET + SHARED_TYPES + "".join(source.read_text() for source in C_SOURCES),
        extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-unused-function"],
        extra_link_args=[f"-L{library.parent}", f"-l:{library.name}"],
    )
    return ffibuilder


def built() -> Path | None:
    """The reader built beside this module for this interpreter, if any."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = HERE / f"_arrow_reader{suffix}"
        if candidate.exists():
            return candidate
    return None


def stale() -> bool:
    """Whether the reader must be built: missing, older than its sources, or linked to a
    librdkafka that is no longer installed (confluent-kafka was upgraded)."""
    target = built()
    if target is None:
        return True
    sources = (*C_SOURCES, Path(__file__), bundled_librdkafka())
    if any(source.stat().st_mtime > target.stat().st_mtime for source in sources):
        return True
    return bundled_librdkafka().name.encode() not in target.read_bytes()


def build() -> Path:
    """Compile the reader and place it beside this module; returns its path."""
    with tempfile.TemporaryDirectory() as tmp:
        compiled = Path(builder().compile(tmpdir=tmp, verbose=False))
        target = HERE / compiled.name
        partial = target.with_name(f".{target.name}.partial")
        shutil.copyfile(compiled, partial)
        partial.replace(target)  # a process importing it meanwhile sees old or new, whole
    return target


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if not stale():
            return 0
        log.info("built the C range reader and producer: %s", build())
    except Exception as exc:  # no compiler: the services go through confluent-kafka
        log.warning(
            "the C range reader and producer were not built (%s); egress will read and "
            "ingress, restore and the relay with filters will produce through "
            "confluent-kafka's Python objects, several times slower",
            exc,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
