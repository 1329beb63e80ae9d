#include "app/gpu_cards.h"

#include <cctype>

#include "engine/core/byte_size.h"
#include "engine/core/error.h"

namespace loft::app {

namespace {
constexpr int64_t kGiB = int64_t(1) << 30;

GpuCard card(const char* id, const char* name, int64_t gib) {
  return {id, cat(name, " (", gib, " GiB)"), gib * kGiB};
}
}  // namespace

// The vendors write "24 GB" for these cards' memory; DRAM chips come in binary sizes (an RTX 4090
// carries twelve 16 Gbit chips), so it is 24 GiB, of which nvidia-smi shows a few MiB less.
const std::vector<GpuCard>& gpu_cards() {
  static const std::vector<GpuCard> cards{
      card("rtx3090", "RTX 3090", 24),    card("rtx4090", "RTX 4090", 24),
      card("rtx4080", "RTX 4080", 16),    card("rtx4060ti", "RTX 4060 Ti 16 GB", 16),
      card("rtx5090", "RTX 5090", 32),    card("a100-40", "A100 40 GB", 40),
      card("a100-80", "A100 80 GB", 80),  card("h100", "H100 80 GB", 80)};
  return cards;
}

std::string gpu_card_ids() {
  std::string ids;
  for (const GpuCard& c : gpu_cards()) ids += (ids.empty() ? "" : ", ") + c.id;
  return ids;
}

GpuCard parse_gpu_card(const std::string& text) {
  std::string id = text;
  for (char& c : id) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const GpuCard& c : gpu_cards())
    if (c.id == id) return c;
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])))
    throw UsageError(cat("--card: '", text, "' is not a card loft knows (", gpu_card_ids(),
                         ") or a size (24GiB, 16GB)"));
  const int64_t bytes = parse_byte_size(text, "--card");
  return {"", cat(format_byte_size(bytes), " card"), bytes};
}

CardFit card_fit(int64_t estimated_peak, const GpuCard& card) {
  const int64_t headroom = card.bytes - estimated_peak - kRuntimeAllowance;
  return {headroom >= 0, headroom};
}

}  // namespace loft::app
