#include "control/wire_codec.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "genie.pb.h"

namespace genie::wire {

std::string encode_msg(const google::protobuf::Message& m) {
  std::string out;
  if (!m.SerializeToString(&out)) {
    fail(GENIE_ERR_INTERNAL, "cannot serialise ", m.GetDescriptor()->full_name(), " (", m.ByteSizeLong(),
         " bytes)");
  }
  return out;
}

void append_submit_frees(std::string* out, const std::vector<uint64_t>& ids) {
  using google::protobuf::internal::WireFormatLite;
  using google::protobuf::io::CodedOutputStream;
  if (ids.empty()) return;  // an empty packed field is not written
  // Packed, as proto3 writes a repeated scalar: tag, length, varints.
  size_t len = 0;
  for (uint64_t id : ids) len += CodedOutputStream::VarintSize64(id);
  const uint32_t tag = WireFormatLite::MakeTag(SubmitFrees::kFreeTensorIdsFieldNumber,
                                               WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  const size_t at = out->size();
  out->resize(at + CodedOutputStream::VarintSize32(tag) + CodedOutputStream::VarintSize64(len) + len);
  auto* p = reinterpret_cast<uint8_t*>(out->data() + at);
  p = CodedOutputStream::WriteVarint32ToArray(tag, p);
  p = CodedOutputStream::WriteVarint64ToArray(len, p);
  for (uint64_t id : ids) p = CodedOutputStream::WriteVarint64ToArray(id, p);
}

}  // namespace genie::wire
