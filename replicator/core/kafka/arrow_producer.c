/* Producing a slice of segment-schema records from their Arrow columns: no Python object
 * per record.
 *
 * Built into the same extension as arrow_reader.c (arrow_reader_build.py). Python's side is
 * replicator/core/kafka/arrow_produce.py, which hands over a writer's own librdkafka
 * producer (the one its transactions run on) and keeps every decision: what a refusal
 * means, what to do when the queue is full, which record carries the delivery report.
 *
 * ap_produce produces records [from, to) of `r`, in order, each to `topic`/`partition`
 * with the record's key and value (NULL kept apart from empty: a NULL pointer is a null,
 * a non-NULL one of length 0 an empty one), its timestamp (0, "stamp it now", for a record
 * whose timestamp type is 0, none), its headers in order (a NULL header value kept), and
 * the provenance header appended: `provenance_name` = `prefix` followed by the record's
 * source offset in decimal. Every byte is copied (RD_KAFKA_MSG_F_COPY): the columns may be
 * freed once the call returns. No per-record opaque: librdkafka's delivery reports of these
 * records reach no callback, and a failed delivery fails the transaction's commit.
 *
 * *largest is set to the index of the produced record with the most bytes of key and value
 * (the first of equals; -1 when none was produced), for the writer's size refusals.
 *
 * It returns the index of the first record not produced (`to` when all were) and sets
 * *error to why it stopped there: 0, RD_KAFKA_RESP_ERR__QUEUE_FULL (the caller serves
 * deliveries and calls again from that index), or the code librdkafka refused the record
 * with (message too large, not in a transaction, ...).
 */

#include <stdlib.h>
#include <string.h>

static const char ap_empty[1] = "";

static int ap_is_null(const struct ap_binary *c, int64_t i) {
    if (!c->validity) return 0;
    int64_t bit = c->validity_offset + i;
    return !((c->validity[bit >> 3] >> (bit & 7)) & 1);
}

/* Element i of a binary column: its bytes and length; NULL for a null element. */
static const void *ap_element(const struct ap_binary *c, int64_t i, size_t *len) {
    if (ap_is_null(c, i)) {
        *len = 0;
        return NULL;
    }
    int32_t start = c->offsets[i], end = c->offsets[i + 1];
    *len = (size_t)(end - start);
    return c->data ? (const void *)(c->data + start) : (const void *)ap_empty;
}

static size_t ap_decimal(char *out, int64_t value) {
    char digits[24];
    size_t n = 0;
    uint64_t v = value < 0 ? (uint64_t)(-(value + 1)) + 1 : (uint64_t)value;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    size_t len = 0;
    if (value < 0) out[len++] = '-';
    while (n) out[len++] = digits[--n];
    return len;
}

int64_t ap_produce(void *rk, const char *topic, int32_t partition, const struct ap_records *r,
                   int64_t from, int64_t to, const char *provenance_name, const char *prefix,
                   size_t prefix_len, int32_t *error, int64_t *largest) {
    *error = 0;
    *largest = -1;
    size_t largest_bytes = 0;
    /* The prefix names a topic (up to 249 bytes), an origin and a partition; the offset
     * takes at most 20 digits and a sign. */
    char *stamp = malloc(prefix_len + 24);
    if (!stamp) {
        *error = RD_KAFKA_RESP_ERR__INVALID_ARG;
        return from;
    }
    rd_kafka_topic_t *rkt = rd_kafka_topic_new((rd_kafka_t *)rk, topic, NULL);
    if (!rkt) {
        *error = rd_kafka_last_error();
        free(stamp);
        return from;
    }
    memcpy(stamp, prefix, prefix_len);
    int64_t i = from;
    for (; i < to; i++) {
        int32_t first = r->header_bounds[i], last = r->header_bounds[i + 1];
        rd_kafka_headers_t *headers = rd_kafka_headers_new((size_t)(last - first) + 1);
        for (int32_t h = first; h < last; h++) {
            size_t name_len, value_len;
            const void *name = ap_element(&r->header_keys, h, &name_len);
            const void *value = ap_element(&r->header_values, h, &value_len);
            rd_kafka_header_add(headers, name ? (const char *)name : ap_empty,
                                (ssize_t)name_len, value, (ssize_t)value_len);
        }
        size_t stamp_len = prefix_len + ap_decimal(stamp + prefix_len, r->offsets[i]);
        rd_kafka_header_add(headers, provenance_name, -1, stamp, (ssize_t)stamp_len);

        size_t key_len, value_len;
        const void *key = ap_element(&r->keys, i, &key_len);
        const void *value = ap_element(&r->values, i, &value_len);
        rd_kafka_vu_t vus[7];
        memset(vus, 0, sizeof vus);
        vus[0].vtype = RD_KAFKA_VTYPE_RKT;
        vus[0].u.rkt = rkt;
        vus[1].vtype = RD_KAFKA_VTYPE_PARTITION;
        vus[1].u.i32 = partition;
        vus[2].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
        vus[2].u.i = RD_KAFKA_MSG_F_COPY;
        vus[3].vtype = RD_KAFKA_VTYPE_VALUE;
        vus[3].u.mem.ptr = (void *)value;
        vus[3].u.mem.size = value_len;
        vus[4].vtype = RD_KAFKA_VTYPE_KEY;
        vus[4].u.mem.ptr = (void *)key;
        vus[4].u.mem.size = key_len;
        vus[5].vtype = RD_KAFKA_VTYPE_TIMESTAMP;
        vus[5].u.i64 = r->timestamp_types[i] == 0 ? 0 : r->timestamps[i];
        vus[6].vtype = RD_KAFKA_VTYPE_HEADERS;
        vus[6].u.headers = headers;
        rd_kafka_error_t *refused = rd_kafka_produceva((rd_kafka_t *)rk, vus, 7);
        if (refused) {
            *error = rd_kafka_error_code(refused);
            rd_kafka_error_destroy(refused);
            rd_kafka_headers_destroy(headers); /* still ours when the record was refused */
            break;
        }
        if (*largest < 0 || key_len + value_len > largest_bytes) {
            *largest = i;
            largest_bytes = key_len + value_len;
        }
    }
    rd_kafka_topic_destroy(rkt);
    free(stamp);
    return i;
}

void *ap_client_opaque(void *rk) { return rd_kafka_opaque((const rd_kafka_t *)rk); }
