#include "datasets/data_loader.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "engine/core/error.h"
#include "engine/io/json_fields.h"

namespace loft::data {
namespace {

int32_t pad_id_of(const Tokenizer& tok) {
  if (tok.pad_id() >= 0) return tok.pad_id();
  return tok.eos_id() >= 0 ? tok.eos_id() : 0;  // padding is never attended to nor trained
}

// Uniform in [0, 1) from 53 random bits: the same on every platform, unlike std distributions.
double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

}  // namespace

std::string DataStats::summary() const {
  std::string s = cat(examples, " examples in ", batches, " batches");
  if (truncated) s += cat(", ", truncated, " truncated to --seq");
  if (dropped_untrained) s += cat(", ", dropped_untrained, " dropped with no trained token left");
  if (skipped_bad) s += cat(", skipped ", skipped_bad, " bad records (first: ", first_skip_reason, ")");
  return s;
}

DataLoader DataLoader::training(const DataConfig& config, const Tokenizer& tok) {
  validate(config);
  return DataLoader(config, tok, config.train, Split::train, false);
}

DataLoader DataLoader::validation(const DataConfig& config, const Tokenizer& tok) {
  validate(config);
  if (!config.val.empty()) return DataLoader(config, tok, config.val, Split::all, true);
  if (config.val_fraction > 0) return DataLoader(config, tok, config.train, Split::val, true);
  throw UsageError("no validation data: give --val-data FILE or --val-fraction F");
}

DataLoader::DataLoader(const DataConfig& config, const Tokenizer& tok, const std::vector<DataSource>& files,
                       Split split, bool ordered)
    : tok_(&tok),
      train_on_inputs_(config.train_on_inputs),
      seq_(config.seq),
      epochs_(ordered ? 1 : config.epochs),
      buffer_capacity_(ordered ? 1 : size_t(std::max<int64_t>(1, config.shuffle_buffer))),
      ordered_(ordered),
      rng_(config.seed),
      packer_(config.seq, config.batch_rows, config.packing, pad_id_of(tok)) {
  for (size_t i = 0; i < files.size(); ++i) {
    sources_.push_back(std::make_unique<Source>(files[i], config, split, int(i), tok));
    weights_.push_back(files[i].weight);
  }
}

int DataLoader::pick_source() {
  if (ordered_ || sources_.size() == 1) return current_;
  double total = 0;
  for (double w : weights_) total += w;
  double u = uniform01(rng_) * total;
  for (size_t i = 0; i + 1 < weights_.size(); ++i) {
    if (u < weights_[i]) return int(i);
    u -= weights_[i];
  }
  return int(weights_.size()) - 1;
}

std::optional<SourceRecord> DataLoader::next_record() {
  for (;;) {
    if (current_ >= int(sources_.size())) return std::nullopt;  // ordered mode: every file read
    Source& src = *sources_[size_t(pick_source())];
    if (auto rec = src.next()) {
      ++records_read_;
      return rec;
    }
    // End of a pass over `src`.
    if (src.records_in_pass() == 0 && !(ordered_ && src.skipped() == 0))
      throw Error(cat(src.path().string(), ": no usable records",
                      src.skipped() ? cat(" (", src.skipped(), " bad records skipped)") : std::string(),
                      ordered_ ? "" : " in the training split"));
    src.finish_pass();
    if (ordered_) {
      ++current_;
      continue;
    }
    const bool all_done = std::all_of(sources_.begin(), sources_.end(),
                                      [&](const auto& s) { return s->passes_done() >= epochs_; });
    if (all_done) return std::nullopt;
    src.restart();
  }
}

std::optional<SourceRecord> DataLoader::next_shuffled() {
  while (!input_done_ && buffer_.size() < buffer_capacity_) {
    auto rec = next_record();
    if (!rec) {
      input_done_ = true;
      break;
    }
    buffer_.push_back(std::move(*rec));
  }
  if (buffer_.empty()) return std::nullopt;
  const size_t pick = buffer_.size() == 1 ? 0 : size_t(rng_() % buffer_.size());
  SourceRecord rec = std::move(buffer_[pick]);
  buffer_[pick] = std::move(buffer_.back());
  buffer_.pop_back();
  return rec;
}

void DataLoader::add_example(const SourceRecord& rec) {
  const Source& src = *sources_[size_t(rec.source)];
  TokenizedExample ex = tokenize_conversation(rec.conv, src.chat_template(), *tok_, train_on_inputs_);
  if (truncate_example(ex, size_t(seq_))) ++stats_.truncated;
  if (ex.trained_count() == 0) {
    ++stats_.dropped_untrained;
    ++drops_in_a_row_;
    return;
  }
  drops_in_a_row_ = 0;
  ++stats_.examples;
  const int64_t trained = ex.trained_count();
  stats_.trained_tokens += trained;
  stats_.masked_tokens += int64_t(ex.size()) - trained;
  packer_.add(std::move(ex));
}

std::optional<PackedBatch> DataLoader::next() {
  while (!packer_.ready()) {
    // A whole pass over the data that yields no trainable example would repeat forever when the
    // epochs are unbounded (--steps without --epochs): say why instead.
    if (records_per_pass_ == 0 && epoch() >= 1) records_per_pass_ = records_read_;
    if (records_per_pass_ > 0 && drops_in_a_row_ >= records_per_pass_)
      throw Error(cat("--data: no example keeps a trained token within --seq ", seq_, " (",
                      stats_.dropped_untrained, " examples dropped: their responses start past ",
                      "token ", seq_, "); raise --seq"));
    auto rec = next_shuffled();
    if (!rec) {
      if (packer_.empty()) return std::nullopt;
      ++stats_.batches;
      return packer_.flush();
    }
    add_example(*rec);
  }
  ++stats_.batches;
  return packer_.take();
}

int64_t DataLoader::epoch() const {
  int64_t e = INT64_MAX;
  for (const auto& s : sources_) e = std::min(e, s->passes_done());
  return e;
}

DataStats DataLoader::stats() const {
  DataStats s = stats_;
  s.skipped_bad = 0;
  s.first_skip_reason.clear();
  for (const auto& src : sources_) {
    s.skipped_bad += src->skipped();
    if (s.first_skip_reason.empty()) s.first_skip_reason = src->first_skip_reason();
  }
  return s;
}

nlohmann::json DataLoader::state() const {
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& s : sources_) sources.push_back(s->state());
  nlohmann::json buffer = nlohmann::json::array();
  for (const SourceRecord& r : buffer_) buffer.push_back({{"source", r.source}, {"pos", to_json(r.start)}});
  std::ostringstream rng;
  rng << rng_;
  return {{"version", 1},
          {"sources", sources},
          {"rng", rng.str()},
          {"buffer", buffer},
          {"input_done", input_done_},
          {"current", current_},
          {"packer", packer_.state()},
          {"stats",
           {{"examples", stats_.examples},
            {"truncated", stats_.truncated},
            {"dropped_untrained", stats_.dropped_untrained},
            {"batches", stats_.batches},
            {"trained_tokens", stats_.trained_tokens},
            {"masked_tokens", stats_.masked_tokens},
            {"records_read", records_read_},
            {"records_per_pass", records_per_pass_}}}};
}

void DataLoader::restore(const nlohmann::json& state) {
  try {
    // Numbers through typed reads: nlohmann's get<int> of 1e300 is undefined behaviour.
    const JsonFields f(state, "the saved data position");
    if (f.integer("version") != 1) throw UsageError("unsupported data position version");
    const auto& sources = state.at("sources");
    if (sources.size() != sources_.size())
      throw UsageError(cat("--data: the data position to resume was saved with ", sources.size(),
                           " data files, not ", sources_.size()));
    for (size_t i = 0; i < sources_.size(); ++i)
      if (sources[i].at("path").get<std::string>() != sources_[i]->path().string())
        throw UsageError(cat("--data: the data position to resume was saved for ", sources[i].at("path").get<std::string>(),
                             ", not ", sources_[i]->path().string()));
    packer_.restore(state.at("packer"));
    // Re-read the shuffle buffer's records, one forward pass per file (cheap for zstd too).
    const auto& buffer = state.at("buffer");
    std::vector<std::pair<int, ReaderPos>> wanted;
    for (const auto& e : buffer)
      wanted.emplace_back(JsonFields(e, f.source(), "buffer.").int32("source"), reader_pos_from_json(e.at("pos")));
    std::vector<size_t> order(wanted.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return std::pair(wanted[a].first, wanted[a].second.stream.offset) <
             std::pair(wanted[b].first, wanted[b].second.stream.offset);
    });
    std::vector<SourceRecord> restored(wanted.size());
    for (size_t i : order) {
      const auto [src, pos] = wanted[i];
      if (src < 0 || src >= int(sources_.size())) throw UsageError("data position: bad source index");
      restored[i] = sources_[size_t(src)]->read_at(pos);
    }
    buffer_ = std::move(restored);
    for (size_t i = 0; i < sources_.size(); ++i) sources_[i]->restore(sources[i]);
    std::istringstream rng(state.at("rng").get<std::string>());
    rng >> rng_;
    if (!rng) throw UsageError("data position: unreadable RNG state");
    input_done_ = f.boolean("input_done");
    current_ = f.int32("current");
    const JsonFields st = f.object("stats");
    stats_.examples = st.integer("examples", 0);
    stats_.truncated = st.integer("truncated", 0);
    stats_.dropped_untrained = st.integer("dropped_untrained", 0);
    stats_.batches = st.integer("batches", 0);
    stats_.trained_tokens = st.has("trained_tokens") ? st.integer("trained_tokens", 0) : 0;
    stats_.masked_tokens = st.has("masked_tokens") ? st.integer("masked_tokens", 0) : 0;
    records_per_pass_ = st.has("records_per_pass") ? st.integer("records_per_pass", 0) : 0;
    records_read_ = st.has("records_read") ? st.integer("records_read", 0) : 0;
    drops_in_a_row_ = 0;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(cat("the saved data position is malformed: ", e.what()));
  }
}

}  // namespace loft::data
