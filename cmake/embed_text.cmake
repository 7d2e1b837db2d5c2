# Embeds a text file (the chat page) in the binary as a C++ raw-string literal.
#
# In a CMakeLists.txt:   include(${PROJECT_SOURCE_DIR}/cmake/embed_text.cmake)
#                        kvedge_embed_text(TARGET target INPUT file.html OUTPUT <include path>.inc)
# writes ${PROJECT_BINARY_DIR}/generated/<include path>.inc at build time (again whenever the input
# changes), adds it to the target's sources and ${PROJECT_BINARY_DIR}/generated to its include path.
# A source then does:   constexpr char kText[] =
#                       #include "<include path>.inc"
#                           ;
# As a script (cmake -DINPUT=... -DOUTPUT=... -P embed_text.cmake) it writes one .inc: the file's
# bytes between R"kvedge_embed( and )kvedge_embed"; a file holding the closing delimiter is refused.

set(_kvedge_embed_script ${CMAKE_CURRENT_LIST_FILE})

function(kvedge_embed_text)
  cmake_parse_arguments(ARG "" "TARGET;INPUT;OUTPUT" "" ${ARGN})
  get_filename_component(input ${ARG_INPUT} ABSOLUTE)
  set(output ${PROJECT_BINARY_DIR}/generated/${ARG_OUTPUT})
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${input} -DOUTPUT=${output} -P ${_kvedge_embed_script}
    DEPENDS ${input} ${_kvedge_embed_script}
    COMMENT "Embedding ${ARG_INPUT}"
    VERBATIM)
  target_sources(${ARG_TARGET} PRIVATE ${output})
  target_include_directories(${ARG_TARGET} PRIVATE ${PROJECT_BINARY_DIR}/generated)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND DEFINED INPUT AND DEFINED OUTPUT)
  file(READ ${INPUT} text)
  string(FIND "${text}" ")kvedge_embed\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )kvedge_embed\" at byte ${clash}")
  endif()
  # Written to a temporary name then renamed, so an interrupted build leaves no half file.
  file(WRITE ${OUTPUT}.tmp "R\"kvedge_embed(${text})kvedge_embed\"\n")
  file(RENAME ${OUTPUT}.tmp ${OUTPUT})
endif()
