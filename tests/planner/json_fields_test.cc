// Numbers from JSON where the planner needs integers: every value that is not a whole number inside the
// field's range is a clear error naming the field, the value and the accepted range — never undefined
// behaviour (a float outside int64's range was once cast to int64: try these under -fsanitize=undefined).
#include "coordinator/planner/json_fields.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "coordinator/planner/plan_request.h"

namespace memcoord::planner {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// ReadInt of {"n": <value_text>} as parsed from JSON text.
Result<std::int64_t> ReadN(const std::string& value_text, std::int64_t min_value, std::int64_t max_value) {
  const nlohmann::json object = nlohmann::json::parse("{\"n\": " + value_text + "}");
  return ReadInt(object, "models[0]", "n", std::nullopt, min_value, max_value);
}

std::string ErrorOf(const std::string& value_text, std::int64_t min_value = 0,
                    std::int64_t max_value = kMax) {
  Result<std::int64_t> r = ReadN(value_text, min_value, max_value);
  if (r.ok()) return "ok " + std::to_string(*r);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  return r.status().message();
}

TEST(JsonFieldsTest, WholeNumbersInRangeAreAccepted) {
  EXPECT_EQ(*ReadN("8", 1, 16), 8);
  EXPECT_EQ(*ReadN("8.0", 1, 16), 8);  // a float holding a whole number is that number
  EXPECT_EQ(*ReadN("-3", -5, 5), -3);
  EXPECT_EQ(*ReadN("9223372036854775807", 0, kMax), kMax);
  EXPECT_EQ(*ReadN("-9223372036854775808", std::numeric_limits<std::int64_t>::min(), 0),
            std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(*ReadN("-9.223372036854775808e18", std::numeric_limits<std::int64_t>::min(), 0),
            std::numeric_limits<std::int64_t>::min());  // -2^63 as a float is exactly representable
  EXPECT_EQ(*ReadN("4.5e15", 0, kMax), 4'500'000'000'000'000);
}

TEST(JsonFieldsTest, FloatsOutsideInt64AreRangeErrors) {
  EXPECT_EQ(ErrorOf("1e30", 1, 16777216),
            "models[0].n must be a whole number between 1 and 16777216, got 1e+30");
  // 9.3e18 and 2^63 are just past int64's largest value: the cast used to be undefined there.
  EXPECT_EQ(ErrorOf("9.3e18"),
            "models[0].n must be a whole number between 0 and 9223372036854775807, got 9.3e+18");
  EXPECT_EQ(
      ErrorOf("9.223372036854775808e18"),
      "models[0].n must be a whole number between 0 and 9223372036854775807, got 9.223372036854776e+18");
  EXPECT_EQ(ErrorOf("-1e300", std::numeric_limits<std::int64_t>::min(), kMax),
            "models[0].n must be a whole number between -9223372036854775808 and 9223372036854775807, got "
            "-1e+300");
}

TEST(JsonFieldsTest, HugeExponentsAreRefusedByTheParserByName) {
  // Past a double's range the JSON parser refuses the number itself; the message quotes it.
  for (const std::string value : {"1e400", "-1e99999"}) {
    Result<PlanRequest> r = ParsePlanRequest(
        R"({"devices": {"count": 2, "capacity": "80GB"}, "models": [{"preset": "gpt2", "batch": )" + value +
        "}]}");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), "the plan file is not valid JSON (number overflow parsing '" + value +
                                        "'); expected {\"devices\": ..., \"models\": [...]}");
  }
  // 1e308 still parses, and is a range error like 1e30.
  EXPECT_EQ(ErrorOf("1e308", 1, 100), "models[0].n must be a whole number between 1 and 100, got 1e+308");
}

TEST(JsonFieldsTest, DeepNestingIsRefusedBeforeAnythingRecursesOnIt) {
  EXPECT_EQ(JsonNestingDepth(R"({"a": [1, {"b": "[[[{{{"}], "c": "\\\"["})"),
            3u);  // brackets in strings skipped
  EXPECT_EQ(JsonNestingDepth("7"), 0u);
  const std::string deep = std::string(70000, '[') + std::string(70000, ']');
  EXPECT_EQ(JsonNestingDepth(deep), 70000u);
  Result<nlohmann::json> r = ParseJson(deep, "the spec", "an object");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(
      r.status().message(),
      "the spec nests arrays and objects 70000 levels deep; at most 64 are accepted; expected an object");
  const std::string fine = std::string(64, '[') + std::string(64, ']');
  EXPECT_TRUE(ParseJson(fine, "the spec", "an object").ok());
  Result<PlanRequest> plan = ParsePlanRequest(R"({"devices": {"count": 2, "capacity": )" + deep + "}}");
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("70002 levels deep"), std::string::npos) << plan.status().message();
}

TEST(JsonFieldsTest, ADirectoryIsNotReadAsAnEmptyFile) {
  Result<std::string> text = ReadTextFile("/tmp", "spec file");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().message(), "cannot read spec file \"/tmp\": it is a directory");
}

TEST(JsonFieldsTest, MessagesQuoteLongValuesShort) {
  Result<std::int64_t> r = ReadN("\"" + std::string(10000, 'x') + "\"", 0, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_LT(r.status().message().size(), 200u) << r.status().message().size();
  EXPECT_NE(r.status().message().find("... (10002 bytes)"), std::string::npos) << r.status().message();
}

TEST(JsonFieldsTest, NonFiniteValuesBuiltInMemoryAreErrors) {
  // Not from JSON text, but a caller building the object (the Plan RPC's live path does) could pass them.
  for (double v : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    const nlohmann::json object = {{"n", v}};
    Result<std::int64_t> r = ReadInt(object, "", "n", std::nullopt, 0, 10);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), std::string("n must be a whole number between 0 and 10, got ") +
                                        (std::isnan(v) ? "nan" : "inf") + " (not a finite number)");
  }
}

TEST(JsonFieldsTest, NegativeWhereNotAllowed) {
  EXPECT_EQ(ErrorOf("-1", 1, 16777216), "models[0].n must be between 1 and 16777216, got -1");
  EXPECT_EQ(ErrorOf("-1.0", 0, 10), "models[0].n must be between 0 and 10, got -1");
}

TEST(JsonFieldsTest, UnsignedAboveInt64IsARangeErrorNotAWrappedValue) {
  // 2^64 - 1 parses as an unsigned JSON number; it must not come back as -1.
  EXPECT_EQ(ErrorOf("18446744073709551615", -5, 5),
            "models[0].n must be between -5 and 5, got 18446744073709551615");
  EXPECT_EQ(ErrorOf("9223372036854775808"),
            "models[0].n must be between 0 and 9223372036854775807, got 9223372036854775808");
}

TEST(JsonFieldsTest, FractionsAreNotIntegers) {
  EXPECT_EQ(ErrorOf("1.5", 1, 16), "models[0].n must be a whole number between 1 and 16, got 1.5");
  EXPECT_EQ(ErrorOf("1e-300", 0, 16), "models[0].n must be a whole number between 0 and 16, got 1e-300");
}

TEST(JsonFieldsTest, NonNumbersAreTypeErrors) {
  EXPECT_EQ(ErrorOf("\"8\"", 1, 16), "models[0].n must be a whole number between 1 and 16, got \"8\"");
  EXPECT_EQ(ErrorOf("true", 1, 16), "models[0].n must be a whole number between 1 and 16, got true");
  EXPECT_EQ(ErrorOf("[8]", 1, 16), "models[0].n must be a whole number between 1 and 16, got [8]");
  EXPECT_EQ(ErrorOf("{}", 1, 16), "models[0].n must be a whole number between 1 and 16, got {}");
}

// The same values through the plan file parser (the Plan RPC and `memcoord plan` read this).
TEST(JsonFieldsTest, PlanFileIntegersNameTheField) {
  const auto plan_error = [](const std::string& field, const std::string& value) {
    const std::string text =
        R"({"devices": {"count": 2, "capacity": "80GB"}, "models": [{"preset": "llama2-7b", ")" + field +
        "\": " + value + "}]}";
    Result<PlanRequest> r = ParsePlanRequest(text);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(plan_error("batch", "1e30"),
            "models[0].batch must be a whole number between 1 and 16777216, got 1e+30");
  EXPECT_EQ(plan_error("batch", "-1"), "models[0].batch must be between 1 and 16777216, got -1");
  EXPECT_EQ(plan_error("batch", "1.5"),
            "models[0].batch must be a whole number between 1 and 16777216, got 1.5");
  EXPECT_EQ(plan_error("seq", "9.3e18"),
            "models[0].seq must be a whole number between 1 and 16777216, got 9.3e+18");
  EXPECT_EQ(plan_error("batch", "\"8\""),
            "models[0].batch must be a whole number between 1 and 16777216, got \"8\"");
  EXPECT_EQ(plan_error("batch", "4.0"), "ok");

  Result<PlanRequest> count = ParsePlanRequest(R"({"devices": {"count": 9.3e18, "capacity": "80GB"},
                                                   "models": [{"preset": "gpt2"}]})");
  ASSERT_FALSE(count.ok());
  EXPECT_EQ(count.status().message(),
            "devices.count must be a whole number between 1 and 65536, got 9.3e+18");
  Result<PlanRequest> layers = ParsePlanRequest(R"({"devices": {"count": 1, "capacity": "80GB"},
      "models": [{"spec": {"family": "gpt2", "hidden": 64, "layers": 1e30, "heads": 4, "vocab": 100}}]})");
  ASSERT_FALSE(layers.ok());
  EXPECT_EQ(layers.status().message(),
            "models[0]: spec.layers must be a whole number between 1 and 100000, got 1e+30");
}

}  // namespace
}  // namespace memcoord::planner
