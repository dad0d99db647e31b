// Parameter counts of every preset against the real models' published totals, and unit structure.
#include "coordinator/planner/model_units.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "coordinator/planner/model_spec.h"

namespace memcoord::planner {
namespace {

std::int64_t Params(const std::string& preset) {
  Result<ModelSpec> spec = PresetSpec(preset);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? TotalParams(*spec) : -1;
}

TEST(ModelUnitsTest, PresetParameterCountsMatchTheRealModels) {
  EXPECT_EQ(Params("gpt2"), 124'439'808);
  EXPECT_EQ(Params("gpt2-medium"), 354'823'168);
  EXPECT_EQ(Params("gpt2-large"), 774'030'080);
  EXPECT_EQ(Params("gpt2-xl"), 1'557'611'200);
  EXPECT_EQ(Params("bert-base"), 109'514'298);   // BertForMaskedLM, bert-base-uncased (the default head)
  EXPECT_EQ(Params("bert-large"), 335'174'458);  // BertForMaskedLM, bert-large-uncased
  EXPECT_EQ(Params("llama2-7b"), 6'738'415'616);
  EXPECT_EQ(Params("llama2-13b"), 13'015'864'320);
  EXPECT_EQ(Params("llama2-70b"), 68'976'648'192);
  EXPECT_EQ(Params("mixtral-8x7b"), 46'702'792'704);
  EXPECT_EQ(Params("resnet50"), 25'557'032);
}

TEST(ModelUnitsTest, HeadsChangeTheHeadUnit) {
  const ModelSpec bert = *PresetSpec("bert-base");
  EXPECT_EQ(TotalParams(bert, OutputHead::kSequenceClassification), 109'483'778);  // pooler + 2 classes
  EXPECT_EQ(TotalParams(bert, OutputHead::kMaskedLm), TotalParams(bert));
  const std::vector<ModelUnit> mlm = BuildUnits(bert, OutputHead::kMaskedLm);
  ASSERT_TRUE(mlm.back().tied_to.has_value());  // the decoder shares the word embeddings
  EXPECT_EQ(*mlm.back().tied_to, 0u);
  EXPECT_EQ(mlm.back().params, 768 * 768 + 3 * 768 + 30522);
  const ModelSpec gpt2 = *PresetSpec("gpt2");
  EXPECT_EQ(TotalParams(gpt2, OutputHead::kSequenceClassification), 124'439'808 + 2 * 768);
  const ModelSpec llama = *PresetSpec("llama2-7b");
  EXPECT_EQ(TotalParams(llama, OutputHead::kSequenceClassification), 6'738'415'616 - 32000 * 4096 + 2 * 4096);
}

TEST(ModelUnitsTest, Gpt2HeadIsTiedToTheEmbeddingsAndCountedOnce) {
  const std::vector<ModelUnit> units = BuildUnits(*PresetSpec("gpt2"));
  ASSERT_EQ(units.size(), 15u);  // embeddings, 12 blocks, final norm, head
  EXPECT_EQ(units.front().name, "embeddings");
  EXPECT_EQ(units.front().params, (50257 + 1024) * 768);
  EXPECT_EQ(units.back().name, "head");
  EXPECT_EQ(units.back().params, 0);
  ASSERT_TRUE(units.back().tied_to.has_value());
  EXPECT_EQ(*units.back().tied_to, 0u);
  EXPECT_EQ(units[1].params, 7'087'872);  // one GPT-2 block
}

TEST(ModelUnitsTest, LlamaHeadIsUntiedAndResNetIsAChainOfStages) {
  const std::vector<ModelUnit> llama = BuildUnits(*PresetSpec("llama2-7b"));
  ASSERT_EQ(llama.size(), 35u);
  EXPECT_FALSE(llama.back().tied_to.has_value());
  EXPECT_EQ(llama.back().params, 32000 * 4096);
  const std::vector<ModelUnit> resnet = BuildUnits(*PresetSpec("resnet50"));
  ASSERT_EQ(resnet.size(), 6u);
  EXPECT_EQ(resnet[0].name, "stem");
  EXPECT_EQ(resnet[5].params, 2048 * 1000 + 1000);
}

TEST(ModelUnitsTest, SpecFileGeometryMatchesTheEquivalentPreset) {
  Result<ModelSpec> spec = ParseModelSpec(nlohmann::json::parse(
      R"({"family": "llama", "hidden": 8192, "layers": 80, "heads": 64, "kv_heads": 8, "ffn": 28672, "vocab": 32000})"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(TotalParams(*spec), 68'976'648'192);
  Result<ModelSpec> moe = ParseModelSpec(nlohmann::json::parse(
      R"({"family": "mixtral", "hidden": 4096, "layers": 32, "heads": 32, "kv_heads": 8, "ffn": 14336,
          "vocab": 32000, "experts": 8, "experts_per_token": 2, "tied_embeddings": false})"));
  ASSERT_TRUE(moe.ok()) << moe.status().ToString();
  EXPECT_EQ(TotalParams(*moe), 46'702'792'704);
}

TEST(ModelUnitsTest, UnknownPresetListsTheAcceptedOnes) {
  Result<ModelSpec> spec = PresetSpec("gpt5");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), StatusCode::kNotFound);
  EXPECT_NE(spec.status().message().find("gpt5"), std::string::npos);
  EXPECT_NE(spec.status().message().find("llama2-70b"), std::string::npos);
}

TEST(ModelUnitsTest, BadSpecFieldsAreNamed) {
  struct Case {
    const char* spec;
    const char* names;  // what the error must name
  };
  const Case cases[] = {
      {R"({"family": "gpt2", "hidden": -768, "layers": 12, "heads": 12, "vocab": 50257})", "spec.hidden"},
      {R"({"family": "t5", "hidden": 768, "layers": 12, "heads": 12, "vocab": 1})", "spec.family"},
      {R"({"family": "llama", "hidden": 768, "layers": 12, "heads": 7, "ffn": 10, "vocab": 1})",
       "spec.heads"},
      {R"({"family": "llama", "hidden": 768, "layers": 12, "heads": 12, "vocab": 1})", "spec.ffn"},
      {R"({"family": "gpt2", "hidden": 768, "layers": 12, "heads": 12, "vocab": 5, "hiden": 3})", "hiden"},
      {R"({"family": "gpt2", "hidden": "big", "layers": 12, "heads": 12, "vocab": 5})", "spec.hidden"},
  };
  for (const Case& c : cases) {
    Result<ModelSpec> s = ParseModelSpec(nlohmann::json::parse(c.spec));
    ASSERT_FALSE(s.ok()) << c.spec;
    EXPECT_NE(s.status().message().find(c.names), std::string::npos)
        << c.spec << ": " << s.status().message();
  }
}

}  // namespace
}  // namespace memcoord::planner
