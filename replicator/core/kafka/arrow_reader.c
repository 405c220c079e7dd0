/* A Kafka partition reader that fills Arrow column buffers straight from librdkafka's
 * messages: no Python object per record.
 *
 * Built by replicator/core/kafka/arrow_reader_build.py (cffi, API mode) against the
 * librdkafka that confluent-kafka's wheel bundles, declared in the build script by the
 * subset of librdkafka's public, ABI-stable API used here. Python's side is
 * replicator/core/kafka/arrow_reads.py, which keeps every decision (what an error means,
 * when a range ends, what a loss is); this file only moves bytes and reports.
 *
 * One call, ar_read, takes up to `most` messages from the consumer queue (waiting at most
 * `timeout_ms` for them; with `eager`, waiting only for the first, then taking at once
 * whatever else was fetched, so a caught-up reader hands over a record as soon as it comes)
 * and appends each record with an offset below `end` to the batch:
 * offset, timestamp and its type, key and value (NULL kept apart from empty), headers in
 * order (a NULL header value kept). It stops early, before the message, at:
 *   - an error event (end of partition, offset out of range, ...): reported with its code,
 *     offset and text; the messages after it stay pending for the next call;
 *   - a record at or past `end`: the range is done (position = end);
 *   - a record with a header name that is not UTF-8: reported as RD_KAFKA_RESP_ERR__BAD_MSG
 *     at its offset, the record left pending;
 *   - the batch's bytes reaching `most_bytes`: the rest stays pending.
 * `position` is always the offset after the last record taken or passed over, so that the
 * caller's position only ever moves forward through what was really handled.
 */

#include <stdlib.h>
#include <string.h>

/* struct ar_buffer, ar_binary and ar_batch, which Python reads too, are declared once in
 * arrow_reader_build.py (SHARED_TYPES), ahead of this file. */

struct ar_reader {
    rd_kafka_t *rk;
    rd_kafka_queue_t *queue;
    rd_kafka_message_t **msgs;
    size_t msgs_cap;
    size_t pending_at; /* next message of msgs[] to handle */
    size_t pending_end;
};

static int ar_reserve(struct ar_buffer *b, size_t more) {
    if (b->len + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : (b->hint > 4096 ? b->hint : 4096);
    while (cap < b->len + more) cap *= 2;
    unsigned char *data = realloc(b->data, cap);
    if (!data) return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}

static int ar_append(struct ar_buffer *b, const void *src, size_t n) {
    if (ar_reserve(b, n)) return -1;
    if (n) memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

/* Hands the filled data to the caller (who frees it with free()), leaving the buffer empty:
 * Arrow takes the bytes as they are, without a copy. */
unsigned char *ar_detach(struct ar_buffer *b) {
    unsigned char *data = b->data;
    b->hint = b->cap;
    b->data = NULL;
    b->len = b->cap = 0;
    return data;
}

static void ar_free_buffer(struct ar_buffer *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static int ar_binary_start(struct ar_binary *c) {
    c->offsets.len = c->data.len = c->validity.len = 0;
    c->count = c->nulls = 0;
    int32_t zero = 0;
    return ar_append(&c->offsets, &zero, sizeof zero);
}

static int ar_binary_add(struct ar_binary *c, const void *bytes, size_t n) {
    if ((c->count & 7) == 0) {
        unsigned char none = 0;
        if (ar_append(&c->validity, &none, 1)) return -1;
    }
    if (bytes) {
        c->validity.data[c->count >> 3] |= (unsigned char)(1u << (c->count & 7));
        if (ar_append(&c->data, bytes, n)) return -1;
    } else {
        c->nulls++;
    }
    int32_t end = (int32_t)c->data.len;
    c->count++;
    return ar_append(&c->offsets, &end, sizeof end);
}

static int utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t extra;
        uint32_t cp;
        if (c < 0x80) { i++; continue; }
        else if ((c & 0xE0) == 0xC0) { extra = 1; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { extra = 2; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { extra = 3; cp = c & 0x07; }
        else return 0;
        if (i + extra >= n) return 0;
        for (size_t k = 1; k <= extra; k++) {
            unsigned char d = s[i + k];
            if ((d & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (d & 0x3F);
        }
        if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) ||
            (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += extra + 1;
    }
    return 1;
}

struct ar_reader *ar_open(const char **names, const char **values, int count,
                          int with_log, char *errstr, size_t errstr_size) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (int i = 0; i < count; i++) {
        if (rd_kafka_conf_set(conf, names[i], values[i], errstr, errstr_size) !=
            RD_KAFKA_CONF_OK) {
            rd_kafka_conf_destroy(conf);
            return NULL;
        }
    }
    if (with_log)
        rd_kafka_conf_set_log_cb(
            conf, (void (*)(const rd_kafka_t *, int, const char *, const char *))ar_log);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, errstr_size);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_poll_set_consumer(rk);
    struct ar_reader *r = calloc(1, sizeof *r);
    if (!r) {
        rd_kafka_destroy(rk);
        strncpy(errstr, "out of memory", errstr_size - 1);
        return NULL;
    }
    r->rk = rk;
    r->queue = rd_kafka_queue_get_consumer(rk);
    return r;
}

static void ar_drop_pending(struct ar_reader *r) {
    while (r->pending_at < r->pending_end) rd_kafka_message_destroy(r->msgs[r->pending_at++]);
    r->pending_at = r->pending_end = 0;
}

int ar_assign(struct ar_reader *r, const char *topic, int32_t partition, int64_t offset) {
    ar_drop_pending(r);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, topic, partition);
    rd_kafka_topic_partition_list_set_offset(list, topic, partition, offset);
    int err = rd_kafka_assign(r->rk, list);
    rd_kafka_topic_partition_list_destroy(list);
    return err;
}

int ar_watermarks(struct ar_reader *r, const char *topic, int32_t partition, int timeout_ms,
                  int64_t *low, int64_t *high) {
    return rd_kafka_query_watermark_offsets(r->rk, topic, partition, low, high, timeout_ms);
}


void ar_close(struct ar_reader *r) {
    if (!r) return;
    ar_drop_pending(r);
    free(r->msgs);
    rd_kafka_consumer_close(r->rk);
    rd_kafka_queue_destroy(r->queue);
    rd_kafka_destroy(r->rk);
    free(r);
}

struct ar_batch *ar_batch_new(void) { return calloc(1, sizeof(struct ar_batch)); }

void ar_batch_free(struct ar_batch *b) {
    if (!b) return;
    ar_free_buffer(&b->offsets);
    ar_free_buffer(&b->timestamps);
    ar_free_buffer(&b->timestamp_types);
    ar_free_buffer(&b->header_counts);
    struct ar_binary *columns[] = {&b->keys, &b->values, &b->header_keys, &b->header_values};
    for (int i = 0; i < 4; i++) {
        ar_free_buffer(&columns[i]->offsets);
        ar_free_buffer(&columns[i]->data);
        ar_free_buffer(&columns[i]->validity);
    }
    free(b);
}

static int ar_batch_start(struct ar_batch *b, int64_t position) {
    b->count = 0;
    b->offsets.len = b->timestamps.len = b->timestamp_types.len = 0;
    b->header_counts.len = 0;
    b->error = 0;
    b->error_offset = -1;
    b->error_text[0] = 0;
    b->position = position;
    b->done = 0;
    int32_t zero = 0;
    if (ar_append(&b->header_counts, &zero, sizeof zero)) return -1;
    if (ar_binary_start(&b->keys) || ar_binary_start(&b->values) ||
        ar_binary_start(&b->header_keys) || ar_binary_start(&b->header_values))
        return -1;
    return 0;
}

static size_t ar_batch_bytes(const struct ar_batch *b) {
    return b->keys.data.len + b->values.data.len + b->header_keys.data.len +
           b->header_values.data.len;
}

/* 1 if the message carries a header named `skip_header`. */
static int ar_has_header(rd_kafka_headers_t *headers, const char *skip_header) {
    const void *value;
    size_t size;
    return headers && rd_kafka_header_get_last(headers, skip_header, &value, &size) ==
                          RD_KAFKA_RESP_ERR_NO_ERROR;
}

/* 1 if every header name is UTF-8 (the segment schema's header keys are strings). */
static int ar_header_names_valid(rd_kafka_headers_t *headers) {
    const char *name;
    const void *value;
    size_t size;
    for (size_t i = 0; headers && rd_kafka_header_get_all(headers, i, &name, &value, &size) ==
                                      RD_KAFKA_RESP_ERR_NO_ERROR;
         i++)
        if (!utf8_valid((const unsigned char *)name, strlen(name))) return 0;
    return 1;
}

/* Appends one record (its header names checked first); -1 when memory ran out. */
static int ar_add(struct ar_batch *b, rd_kafka_message_t *m, rd_kafka_headers_t *headers) {
    rd_kafka_timestamp_type_t type;
    int64_t timestamp = rd_kafka_message_timestamp(m, &type);
    int8_t type8 = (int8_t)type;
    if (ar_append(&b->offsets, &m->offset, sizeof m->offset) ||
        ar_append(&b->timestamps, &timestamp, sizeof timestamp) ||
        ar_append(&b->timestamp_types, &type8, 1) ||
        ar_binary_add(&b->keys, m->key, m->key_len) ||
        ar_binary_add(&b->values, m->payload, m->len))
        return -1;
    if (headers) {
        const char *name;
        const void *value;
        size_t size;
        for (size_t i = 0;
             rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
             i++) {
            if (ar_binary_add(&b->header_keys, name, strlen(name)) ||
                ar_binary_add(&b->header_values, value, size))
                return -1;
        }
    }
    int32_t end = (int32_t)b->header_keys.count;
    if (ar_append(&b->header_counts, &end, sizeof end)) return -1;
    b->count++;
    return 0;
}

static void ar_report(struct ar_batch *b, int32_t error, int64_t offset, const char *text) {
    b->error = error;
    b->error_offset = offset;
    strncpy(b->error_text, text ? text : "", sizeof b->error_text - 1);
    b->error_text[sizeof b->error_text - 1] = 0;
}

/* See the file's comment. Returns 0, or -1 when memory ran out (the batch is unusable). */
int ar_read(struct ar_reader *r, struct ar_batch *b, int most, int timeout_ms, int64_t position,
            int64_t end, const char *skip_header, size_t most_bytes, int eager) {
    if (ar_batch_start(b, position)) return -1;
    if (r->pending_at >= r->pending_end) {
        if (r->msgs_cap < (size_t)most) {
            rd_kafka_message_t **msgs = realloc(r->msgs, sizeof *msgs * (size_t)most);
            if (!msgs) return -1;
            r->msgs = msgs;
            r->msgs_cap = (size_t)most;
        }
        /* librdkafka's batch consume returns once it has `most` messages or the timeout
         * passed: an eager read asks for one within the timeout, then for what is there. */
        size_t first = eager ? 1 : (size_t)most;
        ssize_t got = rd_kafka_consume_batch_queue(r->queue, timeout_ms, r->msgs, first);
        if (got < 0) {
            ar_report(b, rd_kafka_last_error(), -1, rd_kafka_err2str(rd_kafka_last_error()));
            return 0;
        }
        if (eager && got == 1 && most > 1) {
            ssize_t more = rd_kafka_consume_batch_queue(r->queue, 0, r->msgs + 1, (size_t)most - 1);
            if (more > 0) got += more; /* a failure here leaves the rest queued for the next read */
        }
        r->pending_at = 0;
        r->pending_end = (size_t)got;
    }
    while (r->pending_at < r->pending_end) {
        rd_kafka_message_t *m = r->msgs[r->pending_at];
        if (m->err) {
            ar_report(b, m->err, m->offset, rd_kafka_message_errstr(m));
            r->pending_at++;
            rd_kafka_message_destroy(m);
            return 0;
        }
        if (m->offset >= end) {
            b->position = end;
            b->done = 1;
            ar_drop_pending(r);
            return 0;
        }
        rd_kafka_headers_t *headers = NULL;
        if (rd_kafka_message_headers(m, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR) headers = NULL;
        if (!(skip_header && ar_has_header(headers, skip_header))) {
            if (!ar_header_names_valid(headers)) {
                /* Reported before the record: the position stays at its offset. */
                ar_report(b, RD_KAFKA_RESP_ERR__BAD_MSG, m->offset, "a header name is not UTF-8");
                return 0;
            }
            if (ar_add(b, m, headers)) return -1;
        }
        b->position = m->offset + 1;
        r->pending_at++;
        rd_kafka_message_destroy(m);
        if (ar_batch_bytes(b) >= most_bytes) return 0;
    }
    return 0;
}

const char *ar_client_name(const void *rk) { return rd_kafka_name((const rd_kafka_t *)rk); }

/* For the tests: whether n bytes are UTF-8 as the reader judges header names. */
int ar_utf8_valid(const char *bytes, size_t n) { return utf8_valid((const unsigned char *)bytes, n); }
