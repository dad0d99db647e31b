#include "examples/train/step_report.h"

#include <fmt/format.h>

#include <cstdio>

#include "common/bytes.h"

namespace memcoord::train {
namespace {

constexpr std::size_t kStepFields = 10;

// Decimal units, as `memcoord status` and `memcoord trim` print them.
std::string Bytes(std::uint64_t bytes) { return FormatBytes(bytes); }

std::string RankRange(const std::vector<int>& ranks) {
  if (ranks.empty()) return "-";
  if (ranks.size() == 1) return std::to_string(ranks[0]);
  return fmt::format("{}-{}", ranks.front(), ranks.back());
}

double MeanOf(const std::vector<double>& v, std::size_t first, std::size_t count) {
  double s = 0;
  std::size_t n = 0;
  for (std::size_t i = first; i < v.size() && n < count; ++i, ++n) s += v[i];
  return n ? s / static_cast<double>(n) : 0.0;
}

}  // namespace

StepReporter::StepReporter(Communicator& world, std::vector<ModelConfig> models, GroupPlan plan,
                           int total_steps, int print_every)
    : world_(world),
      models_(std::move(models)),
      plan_(std::move(plan)),
      total_steps_(total_steps),
      print_every_(print_every),
      losses_(models_.size()),
      eval_losses_(models_.size()) {}

Status StepReporter::record(const StepRecord& mine) {
  const double packed[kStepFields] = {static_cast<double>(mine.model),
                                      static_cast<double>(mine.step),
                                      mine.loss,
                                      static_cast<double>(mine.batch),
                                      static_cast<double>(mine.reserved_before),
                                      static_cast<double>(mine.reserved_after),
                                      static_cast<double>(mine.trim_step),
                                      static_cast<double>(mine.released),
                                      mine.eval_loss,
                                      mine.step_ms};
  std::vector<double> all(kStepFields * static_cast<std::size_t>(world_.size()));
  MEMCOORD_RETURN_IF_ERROR(world_.allgather(packed, all.data(), kStepFields, DataType::kFloat64));
  if (world_.rank() != 0) return Status::Ok();
  std::vector<StepRecord> records;
  for (int r = 0; r < world_.size(); ++r) {
    const double* f = all.data() + kStepFields * static_cast<std::size_t>(r);
    StepRecord s;
    s.model = static_cast<int>(f[0]);
    s.step = static_cast<std::int64_t>(f[1]);
    s.loss = f[2];
    s.batch = static_cast<int>(f[3]);
    s.reserved_before = static_cast<std::uint64_t>(f[4]);
    s.reserved_after = static_cast<std::uint64_t>(f[5]);
    s.trim_step = static_cast<std::int64_t>(f[6]);
    s.released = static_cast<std::uint64_t>(f[7]);
    s.eval_loss = f[8];
    s.step_ms = f[9];
    records.push_back(s);
  }
  Print(records);
  return Status::Ok();
}

void StepReporter::Print(const std::vector<StepRecord>& all) {
  const std::int64_t step = all[0].step;
  std::vector<double> loss(models_.size(), 0.0);
  std::vector<double> eval(models_.size(), -1.0);
  std::vector<int> count(models_.size(), 0);
  double ms = 0;
  for (const StepRecord& r : all) {
    const auto m = static_cast<std::size_t>(r.model);
    loss[m] += r.loss;
    ++count[m];
    if (r.eval_loss >= 0) eval[m] = r.eval_loss;
    ms = std::max(ms, r.step_ms);
  }
  for (std::size_t m = 0; m < models_.size(); ++m) {
    losses_[m].push_back(count[m] ? loss[m] / count[m] : 0.0);
    if (eval[m] >= 0) eval_losses_[m].push_back(eval[m]);
  }

  if (step % print_every_ == 0 || step == 1 || step == total_steps_) {
    std::string line = fmt::format("step {:>5}/{:<5}", step, total_steps_);
    for (std::size_t m = 0; m < models_.size(); ++m) {
      line += fmt::format(" | {} loss {:.4f}", models_[m].name, losses_[m].back());
    }
    line += " | reserved";
    for (std::size_t r = 0; r < all.size(); ++r)
      line += fmt::format(" r{} {}", r, Bytes(all[r].reserved_after));
    line += fmt::format(" | {:.0f} ms/step", ms);
    std::printf("%s\n", line.c_str());
  }
  bool evaluated = false;
  for (double e : eval) evaluated = evaluated || e >= 0;
  if (evaluated) {
    std::string line = fmt::format("eval {:>5}      ", step);
    for (std::size_t m = 0; m < models_.size(); ++m) {
      if (eval[m] >= 0) line += fmt::format(" | {} eval loss {:.4f}", models_[m].name, eval[m]);
    }
    line += " | reserved after the evaluation's temporaries";
    for (std::size_t r = 0; r < all.size(); ++r)
      line += fmt::format(" r{} {}", r, Bytes(all[r].reserved_before));
    std::printf("%s\n", line.c_str());
  }
  std::vector<std::size_t> trimmed;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].trim_step >= 0) trimmed.push_back(r);
  }
  if (!trimmed.empty()) {
    bool same = trimmed.size() == all.size();
    for (std::size_t r : trimmed) same = same && all[r].trim_step == all[trimmed[0]].trim_step;
    trims_aligned_ = trims_aligned_ && same;
    std::string line = fmt::format(
        "trim {:>5}       | coordinator trim applied at the end of step {} on {}/{} ranks{}:", step,
        all[trimmed[0]].trim_step, trimmed.size(), all.size(), same ? " (all at the same step)" : "");
    for (std::size_t r : trimmed) {
      line += fmt::format(" r{} {} -> {}", r, Bytes(all[r].reserved_before), Bytes(all[r].reserved_after));
      trims_[all[r].trim_step].push_back(all[r]);
    }
    std::printf("%s\n", line.c_str());
  }
  std::fflush(stdout);
}

namespace {

constexpr std::size_t kSummaryFields = 6;

// Every rank's summary, gathered over `world` (host memory) in rank order.
Result<std::vector<RankSummary>> GatherSummaries(Communicator& world, const RankSummary& mine) {
  const std::uint64_t packed[kSummaryFields] = {static_cast<std::uint64_t>(mine.model),
                                                mine.checksum,
                                                mine.peak_reserved,
                                                mine.reserved,
                                                mine.peak_allocated,
                                                static_cast<std::uint64_t>(mine.device)};
  std::vector<std::uint64_t> all(kSummaryFields * static_cast<std::size_t>(world.size()));
  MEMCOORD_RETURN_IF_ERROR(world.allgather(packed, all.data(), kSummaryFields, DataType::kInt64));
  std::vector<RankSummary> summaries(static_cast<std::size_t>(world.size()));
  for (std::size_t r = 0; r < summaries.size(); ++r) {
    const std::uint64_t* f = all.data() + kSummaryFields * r;
    summaries[r] = {
        static_cast<int>(f[0]), f[1], f[2], f[3], f[4], static_cast<int>(static_cast<std::int64_t>(f[5]))};
  }
  return summaries;
}

// Whether every rank training `model` holds the same weights, and their checksum.
std::pair<bool, std::uint64_t> SameWeights(const std::vector<RankSummary>& ranks, std::size_t model) {
  std::uint64_t sum = 0;
  bool identical = true;
  bool seen = false;
  for (const RankSummary& r : ranks) {
    if (static_cast<std::size_t>(r.model) != model) continue;
    if (seen && r.checksum != sum) identical = false;
    sum = r.checksum;
    seen = true;
  }
  return {identical, sum};
}

void PrintRankTable(const std::vector<RankSummary>& ranks, const std::vector<ModelConfig>& models) {
  std::printf("\n%-5s %-8s %-8s %-22s %-14s %-16s\n", "rank", "model", "device", "peak reserved (pools)",
              "reserved now", "peak allocated");
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const RankSummary& f = ranks[r];
    std::printf("%-5zu %-8s %-8s %-22s %-14s %-16s\n", r,
                models[static_cast<std::size_t>(f.model)].name.c_str(),
                f.device < 0 ? "host" : fmt::format("cuda:{}", f.device).c_str(),
                Bytes(f.peak_reserved).c_str(), Bytes(f.reserved).c_str(), Bytes(f.peak_allocated).c_str());
  }
  std::printf("\n");
}

// Rank 0's verdict, broadcast so that every rank returns the same one.
Result<Verdict> ShareVerdict(Communicator& world, const Verdict& mine) {
  std::int64_t verdict[4] = {mine.losses_fell, mine.weights_identical, mine.trims_aligned, mine.trims};
  MEMCOORD_RETURN_IF_ERROR(world.broadcast(verdict, 4, DataType::kInt64, 0));
  Verdict v;
  v.losses_fell = verdict[0] != 0;
  v.weights_identical = verdict[1] != 0;
  v.trims_aligned = verdict[2] != 0;
  v.trims = static_cast<int>(verdict[3]);
  return v;
}

}  // namespace

// Per model: the training loss over the first and last few steps (it must fall by 20%), the evaluations,
// and whether its ranks' weights agree.
void StepReporter::PrintModelTable(const std::vector<RankSummary>& ranks, Verdict& v) const {
  std::printf("\n== final report ==\n");
  std::printf("%-8s %-7s %-10s %-24s %-24s %s\n", "model", "ranks", "params", "train loss first -> last",
              "eval loss first -> last", "weights on every rank of the model");
  for (std::size_t m = 0; m < models_.size(); ++m) {
    const std::vector<double>& l = losses_[m];
    const std::size_t window = std::max<std::size_t>(1, std::min<std::size_t>(5, l.size() / 4));
    const double first = MeanOf(l, 0, window);
    const double last = MeanOf(l, l.size() - window, window);
    const bool fell = last < 0.8 * first;
    v.losses_fell = v.losses_fell && fell;
    const auto [identical, sum] = SameWeights(ranks, m);
    v.weights_identical = v.weights_identical && identical;
    const std::vector<double>& e = eval_losses_[m];
    const std::string eval_text = e.empty() ? "-" : fmt::format("{:.4f} -> {:.4f}", e.front(), e.back());
    std::printf("%-8s %-7s %-10s %-24s %-24s %s\n", models_[m].name.c_str(),
                RankRange(plan_.ranks_of_group[static_cast<std::size_t>(plan_.group_of_model[m])]).c_str(),
                fmt::format("{}", models_[m].shape.parameter_count()).c_str(),
                fmt::format("{:.4f} -> {:.4f}{}", first, last, fell ? "" : " (!)").c_str(), eval_text.c_str(),
                identical ? fmt::format("identical (checksum {:016x})", sum).c_str() : "DIFFER");
  }
}

// The trims seen during the run and the closing verdict line.
void StepReporter::PrintTrimsAndVerdict(Verdict& v) const {
  for (const auto& [step, records] : trims_) {
    std::uint64_t released = 0;
    for (const StepRecord& r : records) released += r.released;
    std::printf("trim at the end of step %lld: %zu/%d ranks, released %s in total\n",
                static_cast<long long>(step), records.size(), world_.size(), Bytes(released).c_str());
  }
  v.trims = static_cast<int>(trims_.size());
  v.trims_aligned = !trims_.empty() && trims_aligned_;
  if (trims_.empty()) std::printf("no coordinator trim happened during the run\n");
  std::printf(
      "losses fell: %s | weights identical within each model: %s | every trim on all ranks at one step: "
      "%s\n",
      v.losses_fell ? "yes" : "NO", v.weights_identical ? "yes" : "NO",
      trims_.empty() ? "no trims" : (v.trims_aligned ? "yes" : "NO"));
  std::fflush(stdout);
}

Result<Verdict> StepReporter::finish(const RankSummary& mine) {
  MEMCOORD_ASSIGN_OR_RETURN(const std::vector<RankSummary> ranks, GatherSummaries(world_, mine));
  Verdict v;  // rank 0's; the others take it from the broadcast
  if (world_.rank() == 0) {
    v.losses_fell = true;
    v.weights_identical = true;
    PrintModelTable(ranks, v);
    PrintRankTable(ranks, models_);
    PrintTrimsAndVerdict(v);
  }
  return ShareVerdict(world_, v);
}

}  // namespace memcoord::train
