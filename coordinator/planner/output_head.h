// The output head a model is trained or run with, an input of the estimate: it decides the head's
// parameters and, above all, whether a vocabulary-wide logits tensor and its fp32 loss exist.
//   causal-lm               logits over the vocabulary at every position, next-token loss (gpt2, llama,
//                           mixtral pretraining; the default for them)
//   masked-lm               BERT's MLM head: dense + GELU + LayerNorm, then logits over the vocabulary at
//                           every position (tied to the word embeddings); the loss counts masked positions
//                           but log-softmax runs over all of them (bert's default)
//   sequence-classification two classes: bert's pooler + classifier; gpt2/llama/mixtral's score layer on
//                           the last token (no vocabulary-wide tensor)
//   image-classification    resnet50's fc layer (its only head)
// Pure functions; thread-safe.
#pragma once

#include <vector>

#include "common/result.h"
#include "coordinator/planner/model_spec.h"
#include "coordinator/planner/training_options.h"

namespace memcoord::planner {

// The heads `family` accepts, its default first.
const std::vector<OutputHead>& AcceptedHeads(ModelFamily family);

// `requested`, or the family's default for kDefault; INVALID_ARGUMENT naming the head, the family and the
// accepted heads when the family has no such head.
Result<OutputHead> ResolveHead(ModelFamily family, OutputHead requested);

// True for heads whose loss runs over the vocabulary at every position.
bool VocabularyHead(OutputHead head);

}  // namespace memcoord::planner
