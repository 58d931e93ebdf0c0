#include "control/wire_json.hpp"

#include <google/protobuf/descriptor.h>

#include <map>
#include <string>

#include "core/error.hpp"

namespace genie::wire {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

cJSON* checked(cJSON* item) {
  check(item != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
  return item;
}

// One value of field `f` (element `index` of a repeated field, or -1).
cJSON* value_json(const Message& m, const FieldDescriptor* f, int index) {
  const Reflection* r = m.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return cJSON_CreateNumber(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return cJSON_CreateNumber(
          static_cast<double>(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f)));
    case FieldDescriptor::CPPTYPE_UINT32:
      return cJSON_CreateNumber(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
    case FieldDescriptor::CPPTYPE_UINT64:
      return cJSON_CreateNumber(
          static_cast<double>(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f)));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return cJSON_CreateNumber(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return cJSON_CreateNumber(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
    case FieldDescriptor::CPPTYPE_BOOL:
      return cJSON_CreateBool(rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f));
    case FieldDescriptor::CPPTYPE_ENUM:
      return cJSON_CreateNumber(rep ? r->GetRepeatedEnumValue(m, f, index) : r->GetEnumValue(m, f));
    case FieldDescriptor::CPPTYPE_STRING: {
      const std::string s = rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
      return cJSON_CreateString(s.c_str());
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      cJSON* o = checked(cJSON_CreateObject());
      try {
        add_fields_to_json(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f), o);
      } catch (...) {
        cJSON_Delete(o);
        throw;
      }
      return o;
    }
  }
  return cJSON_CreateNull();
}

void add(cJSON* out, const char* key, cJSON* item) {
  checked(item);
  if (!cJSON_AddItemToObject(out, key, item)) {
    cJSON_Delete(item);
    fail(GENIE_ERR_OUT_OF_MEMORY, "out of memory");
  }
}

}  // namespace

void add_fields_to_json(const Message& msg, cJSON* out) {
  const google::protobuf::Descriptor* d = msg.GetDescriptor();
  const Reflection* r = msg.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_map()) {
      // Entries are messages {key, value}; JSON objects want string keys.
      const FieldDescriptor* key = f->message_type()->map_key();
      const FieldDescriptor* val = f->message_type()->map_value();
      check(key->cpp_type() == FieldDescriptor::CPPTYPE_STRING, GENIE_ERR_INTERNAL, "map field ", f->name(),
            " has no string keys");
      std::map<std::string, const Message*> sorted;
      for (int k = 0; k < r->FieldSize(msg, f); ++k) {
        const Message& entry = r->GetRepeatedMessage(msg, f, k);
        sorted[entry.GetReflection()->GetString(entry, key)] = &entry;
      }
      cJSON* o = checked(cJSON_CreateObject());
      add(out, f->name().c_str(), o);
      for (const auto& [k, entry] : sorted) add(o, k.c_str(), value_json(*entry, val, -1));
    } else if (f->is_repeated()) {
      cJSON* a = checked(cJSON_CreateArray());
      add(out, f->name().c_str(), a);
      for (int k = 0; k < r->FieldSize(msg, f); ++k) {
        cJSON* item = checked(value_json(msg, f, k));
        if (!cJSON_AddItemToArray(a, item)) {
          cJSON_Delete(item);
          fail(GENIE_ERR_OUT_OF_MEMORY, "out of memory");
        }
      }
    } else {
      add(out, f->name().c_str(), value_json(msg, f, -1));
    }
  }
}

}  // namespace genie::wire
