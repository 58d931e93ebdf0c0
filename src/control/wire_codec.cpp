#include "control/wire_codec.hpp"

namespace genie::wire {

std::string encode_msg(const google::protobuf::Message& m) {
  std::string out;
  if (!m.SerializeToString(&out)) {
    fail(GENIE_ERR_INTERNAL, "cannot serialise ", m.GetDescriptor()->full_name(), " (", m.ByteSizeLong(),
         " bytes)");
  }
  return out;
}

}  // namespace genie::wire
