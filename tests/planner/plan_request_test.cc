// Plan files: accepted forms and every kind of bad input, each rejected with the field named.
#include "coordinator/planner/plan_request.h"

#include <gtest/gtest.h>

#include "coordinator/planner/placement_planner.h"

namespace memcoord::planner {
namespace {

std::string ErrorOf(const std::string& text) {
  Result<PlanRequest> r = ParsePlanRequest(text);
  return r.ok() ? std::string("ok") : r.status().message();
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(PlanRequestTest, DeviceCountAndListForms) {
  Result<PlanRequest> a = ParsePlanRequest(
      R"({"devices": {"count": 8, "capacity": "80GB", "reserve": "1GiB"}, "models": [{"preset": "llama2-70b"}]})");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->devices.size(), 8u);
  EXPECT_EQ(a->devices[7].name, "gpu7");
  EXPECT_EQ(a->devices[0].capacity_bytes, 80'000'000'000u);
  EXPECT_EQ(a->devices[0].usable_bytes(), 80'000'000'000u - (1u << 30));
  EXPECT_EQ(a->models[0].split, SplitKind::kLayers);  // one model: split by layers by default
  Result<PlanRequest> b = ParsePlanRequest(
      R"({"devices": [{"name": "big", "capacity": "80GB"}, {"name": "small", "capacity": 24000000000}],
          "models": [{"preset": "gpt2", "mode": "inference"}, {"spec": {"family": "llama", "hidden": 512,
          "layers": 4, "heads": 8, "ffn": 1376, "vocab": 32000}, "precision": "bf16", "batch": 2, "seq": 64}]})");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->devices[1].capacity_bytes, 24'000'000'000u);
  EXPECT_EQ(b->models[0].split, SplitKind::kWhole);  // several models: whole by default
  EXPECT_EQ(b->models[0].options.batch, 0);          // inference defaults to weights only
  EXPECT_EQ(b->models[1].options.seq, 64);
}

TEST(PlanRequestTest, BadInputNamesTheField) {
  EXPECT_TRUE(Contains(ErrorOf("{\"devices\": "), "not valid JSON"));
  EXPECT_TRUE(Contains(ErrorOf("[1, 2]"), "JSON object"));
  EXPECT_TRUE(Contains(ErrorOf(R"({"models": [{"preset": "gpt2"}]})"), "devices is required"));
  EXPECT_TRUE(
      Contains(ErrorOf(R"({"devices": {"count": 0, "capacity": "80GB"}, "models": [{"preset": "gpt2"}]})"),
               "devices.count"));
  EXPECT_TRUE(Contains(ErrorOf(R"({"devices": [], "models": [{"preset": "gpt2"}]})"), "at least one device"));
  EXPECT_TRUE(
      Contains(ErrorOf(R"({"devices": {"count": 2, "capacity": "-80GB"}, "models": [{"preset": "gpt2"}]})"),
               "devices.capacity"));
  EXPECT_TRUE(
      Contains(ErrorOf(R"({"devices": {"count": 2, "capacity": -5}, "models": [{"preset": "gpt2"}]})"),
               "devices.capacity"));
  EXPECT_TRUE(Contains(
      ErrorOf(
          R"({"devices": {"count": 2, "capacity": "80GB", "reserve": "90GB"}, "models": [{"preset": "gpt2"}]})"),
      "devices.reserve"));
  EXPECT_TRUE(
      Contains(ErrorOf(R"({"devices": {"count": 2, "capacity": "80GB"}, "models": []})"), "models must be"));
  const std::string unknown =
      ErrorOf(R"({"devices": {"count": 2, "capacity": "80GB"}, "models": [{"preset": "gpt5"}]})");
  EXPECT_TRUE(Contains(unknown, "models[0].preset"));
  EXPECT_TRUE(Contains(unknown, "llama2-7b"));  // lists the accepted presets
  EXPECT_TRUE(Contains(
      ErrorOf(
          R"({"devices": {"count": 2, "capacity": "80GB"}, "models": [{"preset": "gpt2", "precision": "fp8"}]})"),
      "models[0].precision"));
  EXPECT_TRUE(Contains(
      ErrorOf(
          R"({"devices": {"count": 2, "capacity": "80GB"}, "models": [{"preset": "gpt2", "batch": -4}]})"),
      "models[0].batch"));
  EXPECT_TRUE(Contains(
      ErrorOf(
          R"({"devices": {"count": 2, "capacity": "80GB"}, "models": [{"preset": "gpt2", "split": "rows"}]})"),
      "models[0].split"));
  EXPECT_TRUE(Contains(
      ErrorOf(R"({"devices": {"count": 2, "capacity": "80GB"}, "models": [{"preset": "gpt2", "spec": {}}]})"),
      "exactly one of"));
  EXPECT_TRUE(Contains(
      ErrorOf(
          R"({"devices": {"count": 2, "capacity": "80GB"}, "models": [{"preset": "gpt2", "batchsize": 4}]})"),
      "batchsize"));
  EXPECT_TRUE(Contains(
      ErrorOf(
          R"({"devices": [{"name": "a", "capacity": "1GB"}, {"name": "a", "capacity": "1GB"}], "models": [{"preset": "gpt2"}]})"),
      "used twice"));
}

TEST(PlanRequestTest, MissingFileIsNamed) {
  Result<PlanRequest> r = LoadPlanRequest("/nonexistent/plan.json");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "/nonexistent/plan.json"));
}

}  // namespace
}  // namespace memcoord::planner

namespace memcoord::planner {
namespace {

// Random byte edits of a valid plan file: every result is a plan or an error, never a crash, and errors
// always carry a message.
TEST(PlanRequestTest, MutatedFilesNeverCrash) {
  const std::string valid =
      R"({"devices": [{"name": "g0", "capacity": "80GB", "reserve": "1GiB"}, {"capacity": 24000000000}],
          "models": [{"preset": "llama2-7b", "precision": "bf16", "mode": "training", "batch": 2, "seq": 512,
                      "checkpointing": "full", "split": "layers"},
                     {"spec": {"family": "gpt2", "hidden": 64, "layers": 2, "heads": 4, "vocab": 100}}]})";
  const std::string alphabet = "{}[]\":,-0123456789.eE abcdefghijklmnopqrstuvwxyzGB";
  std::uint64_t state = 12345;
  const auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
  int ok = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text = valid;
    const int edits = 1 + static_cast<int>(next() >> 60);
    for (int e = 0; e < edits; ++e) {
      const std::size_t pos = (next() >> 20) % text.size();
      switch ((next() >> 40) % 3) {
        case 0:
          text[pos] = alphabet[(next() >> 33) % alphabet.size()];
          break;
        case 1:
          text.erase(pos, 1 + (next() >> 58));
          break;
        default:
          text.insert(pos, 1, alphabet[(next() >> 33) % alphabet.size()]);
          break;
      }
      if (text.empty()) text = "{";
    }
    Result<PlanRequest> r = ParsePlanRequest(text);
    if (r.ok()) {
      ++ok;
      Result<Plan> plan = MakePlan(*r);  // valid requests plan or fail cleanly too
      if (!plan.ok()) {
        EXPECT_FALSE(plan.status().message().empty());
      }
    } else {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  EXPECT_LT(ok, 3000);
}

}  // namespace
}  // namespace memcoord::planner
