// A SentencePiece vocabulary as a GGUF stores it (tokenizer.ggml.*): what
// ConvertToGguf writes. SpmTokenizer::Vocabulary() produces one, so the model
// writer needs no tokenizer.
#ifndef KVEDGE_RUNTIME_MODEL_VOCABULARY_H_
#define KVEDGE_RUNTIME_MODEL_VOCABULARY_H_

#include <string>
#include <vector>

namespace kvedge {

struct SpmVocabulary {
  std::vector<std::string> pieces;  // [vocab] token text, ' ' for spaces
  std::vector<float> scores;        // [vocab] merge scores
  int bos = -1;
  int eos = -1;
  int unk = -1;
};

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_MODEL_VOCABULARY_H_
