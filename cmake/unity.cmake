# Unity builds (K3_UNITY, on by default): the sources of one folder are compiled together, at most
# K3_UNITY_FILES to a translation unit, so the headers they share (the standard library, the
# Experiment API, the report) are parsed once per folder instead of once per file. It more than
# halves the CPU time of a clean build, which is what the test command spends most of its time on.
# The price: names private to a file (static functions, anonymous namespaces) must be unique within
# its folder. Turn it off for edit-compile cycles on one file: -DK3_UNITY=OFF.
option(K3_UNITY "Compile each folder's sources as one translation unit (unity build)" ON)
set(K3_UNITY_FILES 12 CACHE STRING "Most sources in one unity translation unit")

# Sources libFuzzer's coverage allowlist names (tests/fuzz/coverage_allowlist.txt, "src:" lines) stay
# translation units of their own in fuzz builds: the allowlist matches a unit's main file.
set(K3_UNITY_SKIP_REGEX "")
if(K3_FUZZ)
  file(STRINGS "${PROJECT_SOURCE_DIR}/tests/fuzz/coverage_allowlist.txt" allow REGEX "^src:")
  foreach(line IN LISTS allow)
    string(REGEX REPLACE "^src:" "" glob "${line}")
    string(REPLACE "." "\\." glob "${glob}")
    string(REPLACE "*" ".*" glob "${glob}")
    list(APPEND K3_UNITY_SKIP_REGEX "^${glob}$")
  endforeach()
endif()

# k3_unity(TARGET): groups the target's .cpp sources by folder (generated sources stay alone).
function(k3_unity target)
  if(NOT K3_UNITY)
    return()
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  foreach(src IN LISTS sources)
    if(NOT src MATCHES "\\.cpp$")
      continue()
    endif()
    get_filename_component(abs "${src}" ABSOLUTE BASE_DIR "${source_dir}")
    if(NOT abs MATCHES "^${PROJECT_SOURCE_DIR}/")
      continue()  # generated (embedded fonts and texts): large data, nothing to share
    endif()
    set(skip OFF)
    foreach(re IN LISTS K3_UNITY_SKIP_REGEX)
      if(abs MATCHES "${re}")
        set(skip ON)
      endif()
    endforeach()
    get_source_file_property(alone "${abs}" TARGET_DIRECTORY ${target} SKIP_UNITY_BUILD_INCLUSION)
    if(skip OR alone)
      set_source_files_properties("${abs}" TARGET_DIRECTORY ${target} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
      continue()
    endif()
    file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${abs}")
    get_filename_component(dir "${rel}" DIRECTORY)
    string(MAKE_C_IDENTIFIER "${dir}" group)
    if(NOT DEFINED count_${group})
      set(count_${group} 0)
    endif()
    math(EXPR part "${count_${group}} / ${K3_UNITY_FILES}")
    math(EXPR count_${group} "${count_${group}} + 1")
    set_source_files_properties("${abs}" TARGET_DIRECTORY ${target} PROPERTIES UNITY_GROUP "${group}_${part}")
  endforeach()
endfunction()
