// TFRecord framing, the container of TensorBoard event files: each record is
//   uint64 length (little-endian), uint32 masked CRC-32C of those 8 bytes,
//   `length` bytes of data, uint32 masked CRC-32C of the data.
// No Debian library writes it (it lives inside TensorFlow), so it is written here.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace loft::report {

void write_tf_record(std::ostream& out, std::string_view data);
// Every record of a file, each CRC checked; throws loft::Error naming the file and the record's
// offset for a bad CRC or a truncated record.
std::vector<std::string> read_tf_records(const std::filesystem::path& file);

}  // namespace loft::report
