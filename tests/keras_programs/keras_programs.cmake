# The Keras-program corpus of issue 21 (tests/keras_programs/README.md): one ctest entry per program,
# label keras_programs. keras_programs_setup copies the programs out of their repositories' stored
# snapshots (they are not committed here) and writes the synthetic Keras cache files; every program
# needs it. Only the programs named in expected_pass.txt are registered (the others' status and
# first cause: `corpus.py table`, tests/keras_programs/STATUS.md); add a name there once it runs.
set(TNT_KP_DIR ${CMAKE_SOURCE_DIR}/tests/keras_programs)
set(TNT_KP_OUT ${CMAKE_BINARY_DIR}/keras_programs)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${TNT_KP_DIR}/programs.py
             ${TNT_KP_DIR}/expected_pass.txt)
execute_process(COMMAND ${Python3_EXECUTABLE} ${TNT_KP_DIR}/corpus.py list
                OUTPUT_VARIABLE TNT_KP_ALL OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE TNT_KP_RC)
execute_process(COMMAND ${Python3_EXECUTABLE} ${TNT_KP_DIR}/corpus.py list --expected
                OUTPUT_VARIABLE TNT_KP_EXPECTED OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT TNT_KP_RC EQUAL 0)
  message(WARNING "keras_programs: corpus.py list failed; the corpus is not registered")
  return()
endif()
# The programs come from their repositories' snapshots (README: why they are not committed); a
# machine without them cannot run the corpus, and says so here instead of failing 40 tests.
execute_process(COMMAND ${Python3_EXECUTABLE} ${TNT_KP_DIR}/corpus.py missing
                OUTPUT_VARIABLE TNT_KP_MISSING OUTPUT_STRIP_TRAILING_WHITESPACE)
if(TNT_KP_MISSING)
  message(STATUS "keras_programs: not registered: no snapshot of ${TNT_KP_MISSING} on this machine "
                 "(TNT_KERAS_CORPUS_MIRRORS: a folder of bare clones <owner>+<name>/repo; tests/keras_programs/README.md)")
  return()
endif()
add_test(NAME keras_programs_setup COMMAND ${Python3_EXECUTABLE} ${TNT_KP_DIR}/corpus.py prepare ${TNT_KP_OUT})
set_tests_properties(keras_programs_setup PROPERTIES FIXTURES_SETUP keras_programs LABELS keras_programs
                     TIMEOUT 120)
list(LENGTH TNT_KP_ALL TNT_KP_N)
list(LENGTH TNT_KP_EXPECTED TNT_KP_NE)
message(STATUS "keras_programs: ${TNT_KP_N} programs, ${TNT_KP_NE} enabled (expected_pass.txt)")
foreach(name ${TNT_KP_EXPECTED})
  add_test(NAME keras_program_${name}
           COMMAND ${Python3_EXECUTABLE} ${TNT_KP_DIR}/corpus.py run ${name} --originals ${TNT_KP_OUT}/originals
                   --keras-home ${TNT_KP_OUT}/home --work ${TNT_KP_OUT}/work)
  set_tests_properties(keras_program_${name} PROPERTIES FIXTURES_REQUIRED keras_programs LABELS keras_programs
                       TIMEOUT 300 ENVIRONMENT "${TNT_PY_TEST_ENV};OMP_NUM_THREADS=1")
endforeach()
