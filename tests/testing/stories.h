// The stories260K model and its tok512 tokenizer (../shared/models), loaded
// once per test binary and kept for its life: the common fixture of the
// engine, session and generation tests. Header-only; link kvedge_runtime.
#ifndef KVEDGE_TESTS_TESTING_STORIES_H_
#define KVEDGE_TESTS_TESTING_STORIES_H_

#include "platform/status.h"
#include "runtime/model/model_loader.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/testing/test_data.h"

namespace kvedge::testing {

inline const ModelWeights& StoriesModel() {
  static const ModelWeights* m = [] {
    auto w = LoadModel(SharedPath("models/stories260K.bin"));
    KVEDGE_CHECK(w.ok());
    return std::move(w).value().release();
  }();
  return *m;
}

inline const Tokenizer& StoriesTokenizer() {
  static const Tokenizer* t = [] {
    auto w = LoadTokenizer(StoriesModel(), SharedPath("models/tok512.bin"));
    KVEDGE_CHECK(w.ok());
    return std::move(w).value().release();
  }();
  return *t;
}

}  // namespace kvedge::testing

#endif  // KVEDGE_TESTS_TESTING_STORIES_H_
