// Names of the operation types (ycsb/operation.h).
#include "ycsb/operation.h"

namespace ycsb {

const char* to_string(op_type type) noexcept {
  switch (type) {
    case op_type::insert: return "INSERT";
    case op_type::read: return "READ";
    case op_type::update: return "UPDATE";
    case op_type::scan: return "SCAN";
    case op_type::read_modify_write: return "RMW";
    case op_type::remove: return "DELETE";
  }
  return "?";
}

}  // namespace ycsb
