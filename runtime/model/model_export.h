// Writing llama models as GGUF with kvedge's writer: conversion of a loaded
// (llama2.c) model, and random-weight models of real shapes for benchmarks.
#ifndef KVEDGE_RUNTIME_MODEL_MODEL_EXPORT_H_
#define KVEDGE_RUNTIME_MODEL_MODEL_EXPORT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/model/model.h"
#include "runtime/model/vocabulary.h"

namespace kvedge {

// Writes `model` (F32 weights, e.g. from llama2.c) as a GGUF v3 "llama" file
// with `vocab` (SpmTokenizer::Vocabulary(); tokenizer.ggml.model "llama",
// U+2581 for spaces). Matrices are stored as `type`; a Q8_0/Q4_0 matrix whose rows are
// not a multiple of 32 (stories260K's ffn_down: 172) is stored as F16, as
// llama.cpp falls back. Norms stay F32. Tied embeddings stay tied.
Status ConvertToGguf(const ModelWeights& model, const SpmVocabulary& vocab, const std::string& path,
                     WeightType type);

// The shape of a synthetic llama model.
struct SynthShape {
  std::string name;
  int dim = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int hidden_dim = 0;
  int vocab_size = 0;
  int context_length = 0;
};

// "tinyllama-1.1b" (2048, 22 layers, 32/4 heads, ffn 5632, vocab 32000,
// ctx 2048) and "llama-7b" (4096, 32, 32/32, 11008, 32000, 4096).
StatusOr<SynthShape> SynthPreset(std::string_view name);

// Writes a random-weight llama GGUF of `shape`: matrices ~N(0, 0.02²) stored
// as `type` (F16, Q8_0 or Q4_0; embeddings too), norms 1.0 in F32, untied
// output, and a synthetic SentencePiece vocabulary (<unk>, <s>, </s>, 256
// byte tokens, printable ASCII, then "▁"-prefixed letter strings). Streams
// one row batch at a time: memory stays O(rows × dim), never the model.
// Deterministic in `seed`.
Status WriteRandomLlamaGguf(const SynthShape& shape, WeightType type, uint64_t seed, const std::string& path);

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_MODEL_MODEL_EXPORT_H_
