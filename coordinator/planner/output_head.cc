#include "coordinator/planner/output_head.h"

#include <algorithm>

namespace memcoord::planner {

const std::vector<OutputHead>& AcceptedHeads(ModelFamily family) {
  static const std::vector<OutputHead> lm = {OutputHead::kCausalLm, OutputHead::kSequenceClassification};
  static const std::vector<OutputHead> bert = {OutputHead::kMaskedLm, OutputHead::kSequenceClassification};
  static const std::vector<OutputHead> image = {OutputHead::kImageClassification};
  switch (family) {
    case ModelFamily::kBert:
      return bert;
    case ModelFamily::kResNet50:
      return image;
    case ModelFamily::kGpt2:
    case ModelFamily::kLlama:
    case ModelFamily::kMixtral:
      break;
  }
  return lm;
}

Result<OutputHead> ResolveHead(ModelFamily family, OutputHead requested) {
  const std::vector<OutputHead>& accepted = AcceptedHeads(family);
  if (requested == OutputHead::kDefault) return accepted.front();
  if (std::find(accepted.begin(), accepted.end(), requested) != accepted.end()) return requested;
  std::string names;
  for (OutputHead h : accepted) names += (names.empty() ? "" : ", ") + std::string(OutputHeadName(h));
  return InvalidArgument("head \"" + std::string(OutputHeadName(requested)) + "\" is not accepted for " +
                         std::string(ModelFamilyName(family)) + "; accepted: " + names +
                         " (or default: " + std::string(OutputHeadName(accepted.front())) + ")");
}

bool VocabularyHead(OutputHead head) {
  return head == OutputHead::kCausalLm || head == OutputHead::kMaskedLm;
}

}  // namespace memcoord::planner
