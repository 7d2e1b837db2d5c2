# kvedge as a library others embed: libkvedge.so (exports only the C API of
# include/kvedge.h), libkvedge.a (everything the C API needs in one archive),
# install rules, the CMake package (find_package(kvedge)), kvedge.pc, and the
# Debian packages kvedge, libkvedge0 and libkvedge-dev (cpack -G DEB).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The ABI number has one home, the header; it is the SONAME's number.
file(STRINGS "${PROJECT_SOURCE_DIR}/include/kvedge.h" _kvedge_abi_line REGEX "^#define KVEDGE_ABI_VERSION [0-9]+$")
string(REGEX REPLACE "^#define KVEDGE_ABI_VERSION " "" KVEDGE_ABI_VERSION "${_kvedge_abi_line}")
if(NOT KVEDGE_ABI_VERSION MATCHES "^[0-9]+$")
  message(FATAL_ERROR "include/kvedge.h: no '#define KVEDGE_ABI_VERSION <number>' line")
endif()

# External libraries the C API's code links, as the installed package finds
# them: target | CMake code that defines it in a consumer | pkg-config module
# or -l flag (a target may take several rows, run in order).
# A library that kvedge_runtime comes to link must be added here, or the
# static library's consumers (scripts/test-install.sh) fail to link.
set(_kvedge_external_deps
  "hwy::hwy|find_dependency(hwy 1.0.3 CONFIG)|libhwy"
  "hwy::hwy_contrib|find_dependency(hwy 1.0.3 CONFIG)|libhwy-contrib"
  "TBB::tbb|find_dependency(TBB CONFIG)|tbb"
  "mimalloc|find_dependency(mimalloc CONFIG)|-lmimalloc"
  "Threads::Threads|find_dependency(Threads)|-pthread"
  "PkgConfig::PCRE2|find_dependency(PkgConfig)|libpcre2-8"
  "PkgConfig::PCRE2|pkg_check_modules(PCRE2 REQUIRED QUIET IMPORTED_TARGET libpcre2-8)|libpcre2-8")
# Header-only libraries: needed to compile kvedge, never by its consumers.
set(_kvedge_header_only_deps nlohmann_json::nlohmann_json)

# _kvedge_link_closure(target): appends to _kvedge_internal the project's
# static libraries `target` links (itself included), and to _kvedge_external
# the imported libraries they link.
function(_kvedge_link_closure target)
  if(target IN_LIST _kvedge_internal)
    return()
  endif()
  list(APPEND _kvedge_internal ${target})
  get_target_property(_links ${target} LINK_LIBRARIES)
  foreach(_item IN LISTS _links)
    if(NOT TARGET ${_item} OR _item IN_LIST _kvedge_header_only_deps)
      continue()
    endif()
    get_target_property(_imported ${_item} IMPORTED)
    get_target_property(_type ${_item} TYPE)
    if(_imported)
      list(APPEND _kvedge_external ${_item})
    elseif(_type STREQUAL "STATIC_LIBRARY")
      _kvedge_link_closure(${_item})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _kvedge_external)
  set(_kvedge_internal ${_kvedge_internal} PARENT_SCOPE)
  set(_kvedge_external ${_kvedge_external} PARENT_SCOPE)
endfunction()
set(_kvedge_internal)
set(_kvedge_external)
_kvedge_link_closure(kvedge_runtime)

set(_kvedge_objects)
foreach(_lib IN LISTS _kvedge_internal)
  list(APPEND _kvedge_objects $<TARGET_OBJECTS:${_lib}>)
endforeach()
set(_kvedge_static_links)
set(_kvedge_find_dependencies)
set(_kvedge_pc_requires)
set(_kvedge_pc_libs "-lstdc++ -lm")
foreach(_dep IN LISTS _kvedge_external)
  set(_known FALSE)
  foreach(_row IN LISTS _kvedge_external_deps)
    string(REPLACE "|" ";" _fields "${_row}")
    list(GET _fields 0 _target)
    list(GET _fields 1 _find)
    list(GET _fields 2 _pc)
    if(_target STREQUAL _dep)
      set(_known TRUE)
      list(APPEND _kvedge_static_links ${_target})
      list(APPEND _kvedge_find_dependencies "${_find}")
      if(_pc MATCHES "^-")
        string(APPEND _kvedge_pc_libs " ${_pc}")
      else()
        list(APPEND _kvedge_pc_requires ${_pc})
      endif()
    endif()
  endforeach()
  if(NOT _known)
    message(WARNING "kvedge_runtime links ${_dep}, which cmake/package.cmake does not declare for the installed "
                    "package: add it to _kvedge_external_deps")
  endif()
endforeach()
list(REMOVE_DUPLICATES _kvedge_static_links)
list(REMOVE_DUPLICATES _kvedge_pc_requires)
string(REPLACE ";" ", " KVEDGE_PC_REQUIRES_PRIVATE "${_kvedge_pc_requires}")
set(KVEDGE_PC_LIBS_PRIVATE "${_kvedge_pc_libs}")
list(REMOVE_DUPLICATES _kvedge_find_dependencies)
list(JOIN _kvedge_find_dependencies "\n" KVEDGE_FIND_DEPENDENCIES)

set(_kvedge_public_includes $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                            $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

# libkvedge.so: the objects of kvedge_runtime; the archives it links supply
# the rest. Highway, oneTBB and mimalloc stay ordinary shared dependencies.
add_library(kvedge_shared SHARED ${_kvedge_objects})
target_link_libraries(kvedge_shared PRIVATE kvedge_runtime)
target_include_directories(kvedge_shared PUBLIC ${_kvedge_public_includes})
set_target_properties(kvedge_shared PROPERTIES
  OUTPUT_NAME kvedge EXPORT_NAME kvedge VERSION ${PROJECT_VERSION} SOVERSION ${KVEDGE_ABI_VERSION}
  LINKER_LANGUAGE CXX)
# Only kvedge_* exported; no undefined symbols left for the embedder to supply
# (except under sanitizers: clang leaves their runtime to the executable).
target_link_options(kvedge_shared PRIVATE LINKER:--version-script=${PROJECT_SOURCE_DIR}/cmake/libkvedge.map)
if(NOT KVEDGE_SANITIZE AND NOT KVEDGE_BUILD_FUZZ)
  target_link_options(kvedge_shared PRIVATE LINKER:--no-undefined)
endif()
set_property(TARGET kvedge_shared APPEND PROPERTY LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/libkvedge.map)
add_library(kvedge::kvedge ALIAS kvedge_shared)

# libkvedge.a: the same code as one archive, for embedders that link statically.
add_library(kvedge_static STATIC ${_kvedge_objects})
# A C program links with the C driver, which does not add the C++ runtime.
target_link_libraries(kvedge_static INTERFACE ${_kvedge_static_links} stdc++ m)
target_include_directories(kvedge_static PUBLIC ${_kvedge_public_includes})
set_target_properties(kvedge_static PROPERTIES OUTPUT_NAME kvedge EXPORT_NAME kvedge_static LINKER_LANGUAGE CXX)
add_library(kvedge::kvedge_static ALIAS kvedge_static)

if(KVEDGE_BUILD_TESTS)
  add_test(NAME kvedge_shared_exports
           COMMAND ${CMAKE_COMMAND} -DNM=${CMAKE_NM} -DLIBRARY=$<TARGET_FILE:kvedge_shared>
                   -DHEADER=${PROJECT_SOURCE_DIR}/include/kvedge.h -P ${PROJECT_SOURCE_DIR}/cmake/check-exports.cmake)
  set_tests_properties(kvedge_shared_exports PROPERTIES LABELS unit TIMEOUT 60)

  # examples/stream.c as an embedder compiles it (strict C99) against libkvedge.so,
  # run on the model shipped in models/.
  add_executable(kvedge_example_stream examples/stream.c)
  set_target_properties(kvedge_example_stream PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  target_compile_options(kvedge_example_stream PRIVATE -Wall -Wextra -pedantic -Werror)
  target_link_libraries(kvedge_example_stream PRIVATE kvedge_shared)
  add_test(NAME kvedge_example_stream
           COMMAND kvedge_example_stream ${PROJECT_SOURCE_DIR}/models/stories260K.gguf "Once upon a time" 40)
  set_tests_properties(kvedge_example_stream PROPERTIES LABELS unit TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "^Once upon a time, there was a little girl named Lily.*45 tokens seen")

  # The ctypes binding loads the library into the interpreter: not under
  # qemu, nor with sanitizers (the interpreter is not instrumented).
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_Interpreter_FOUND AND NOT CMAKE_CROSSCOMPILING AND NOT KVEDGE_SANITIZE)
    add_test(NAME kvedge_python_test
             COMMAND Python3::Interpreter -m unittest discover -s ${PROJECT_SOURCE_DIR}/bindings/python -v)
    set_tests_properties(kvedge_python_test PROPERTIES LABELS unit TIMEOUT 120
                         ENVIRONMENT "KVEDGE_LIBRARY=$<TARGET_FILE:kvedge_shared>")
  endif()
endif()

# --- install ---------------------------------------------------------------
# Components: cli (package kvedge), runtime (libkvedge0), dev (libkvedge-dev).
set(KVEDGE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kvedge)
install(TARGETS kvedge RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
install(TARGETS kvedge_shared EXPORT kvedgeTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
install(TARGETS kvedge_static EXPORT kvedgeTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/include/kvedge.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(EXPORT kvedgeTargets NAMESPACE kvedge:: DESTINATION ${KVEDGE_INSTALL_CMAKEDIR} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kvedgeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kvedgeConfig.cmake INSTALL_DESTINATION ${KVEDGE_INSTALL_CMAKEDIR})
# 0.x: a new minor version may change the API, so only 0.2.* satisfies 0.2.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kvedgeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kvedgeConfig.cmake ${PROJECT_BINARY_DIR}/kvedgeConfigVersion.cmake
  DESTINATION ${KVEDGE_INSTALL_CMAKEDIR} COMPONENT dev)
# kvedge.pc finds its prefix from its own place, so the tree can be moved.
file(RELATIVE_PATH KVEDGE_PC_PREFIX_FROM_PCFILEDIR "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" KVEDGE_PC_PREFIX_FROM_PCFILEDIR "${KVEDGE_PC_PREFIX_FROM_PCFILEDIR}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/kvedge.pc.in ${PROJECT_BINARY_DIR}/kvedge.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kvedge.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# --- Debian packages (cpack -G DEB in the build directory) -------------------
# The CLI uses the C++ internals, not the C API, so it links them statically
# and the kvedge package does not depend on libkvedge0. Its Depends come from
# dpkg-shlibdeps (SHLIBDEPS below): libedit2, which only the CLI links, among them.
set(CPACK_PACKAGE_NAME kvedge)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "LLM inference on CPUs in bounded memory with a compressed KV cache")
set(CPACK_PACKAGE_CONTACT "kvedge developers")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL cli runtime dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_CLI_PACKAGE_NAME kvedge)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libkvedge${KVEDGE_ABI_VERSION})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# Programs built against 0.2.0 run on any later libkvedge0.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libkvedge-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# find_dependency() in kvedgeConfig.cmake needs the dependencies' CMake files.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libhwy-dev, libtbb-dev, libmimalloc-dev, libpcre2-dev")
set(CPACK_COMPONENT_CLI_DESCRIPTION "kvedge command line: generate, perplexity, bench, info")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "kvedge shared library (C API)")
set(CPACK_COMPONENT_DEV_DESCRIPTION "kvedge C header, static library, CMake package and pkg-config file")
set(CPACK_COMPONENT_DEV_DEPENDS runtime)
include(CPack)
