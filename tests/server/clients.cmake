# tests/server, the clients (included by tests/server/CMakeLists.txt): Node tests that start their own
# `kvedge serve --port 0` on stories260K — the official openai package, the chat page in Debian's
# headless Chromium (playwright-core), and the short load test. The npm packages come from
# scripts/install-deps.sh (npm ci in tests/server/node); without them the first two SKIP (exit 77).
# For an ASan/TSan build the binary is that build's kvedge (or $KVEDGE_BIN); RSS is not bounded there.
find_program(KVEDGE_NODE node)
if(NOT KVEDGE_NODE OR CMAKE_CROSSCOMPILING)
  message(STATUS "kvedge: no node (or cross build): the server client tests are not registered")
  return()
endif()
set(_serve_model -m ${KVEDGE_SHARED_DIR}/models/stories260K.bin --tokenizer ${KVEDGE_SHARED_DIR}/models/tok512.bin -t 1)
foreach(_t openai_client browser)
  add_test(NAME server.${_t} COMMAND ${KVEDGE_NODE} ${CMAKE_CURRENT_LIST_DIR}/${_t}_test.mjs
           --kvedge $<TARGET_FILE:kvedge> -- ${_serve_model})
  set_tests_properties(server.${_t} PROPERTIES LABELS server TIMEOUT 300 SKIP_RETURN_CODE 77)
endforeach()
if(KVEDGE_SANITIZE)
  set(_rss_check off)
else()
  set(_rss_check on)
endif()
# The full run (64 clients x 60 s, docs/server.md) is the same script with --clients 64 --seconds 60.
add_test(NAME server.load_short COMMAND ${KVEDGE_NODE} ${CMAKE_CURRENT_LIST_DIR}/load_test.mjs
         --kvedge $<TARGET_FILE:kvedge> --clients 16 --seconds 10 --budget-mib 8 --rss-check ${_rss_check}
         -- ${_serve_model})
set_tests_properties(server.load_short PROPERTIES LABELS server TIMEOUT 600 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
