// Protobuf messages of the wire protocol as JSON objects for the C API's
// JSON queries (genie_server_info): one field of the message, one key, so a
// field added to proto/genie.proto appears without further code. Unlike
// protobuf's own JSON mapping, 64-bit integers are JSON numbers (exact up to
// 2^53), as the C API documents.
#pragma once

#include <cjson/cJSON.h>
#include <google/protobuf/message.h>

namespace genie::wire {

// Adds every field of `msg` to the object `out`, in field-number order:
// scalars (unset ones too, with their default), strings, nested messages as
// objects, repeated fields as arrays, and maps with string keys as objects
// (keys sorted). Throws Error(OUT_OF_MEMORY).
void add_fields_to_json(const google::protobuf::Message& msg, cJSON* out);

}  // namespace genie::wire
