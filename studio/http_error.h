// An HTTP failure a route throws: its status and the one-line message the client gets as
// {"error": ...} (studio/server.cpp's exception handler writes it).
#pragma once
#include <stdexcept>
#include <string>

namespace loft::studio {

class HttpError : public std::runtime_error {
 public:
  HttpError(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

}  // namespace loft::studio
