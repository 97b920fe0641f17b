# gpu_kernels.cmake: the device kernels (src/gpu/kernels/kernels.cu, CUDA C) -> PTX with clang-14
# (no CUDA SDK) -> `const char tnt__gpu_ptx[]` compiled into the library.
#
#   include(cmake/gpu_kernels.cmake)
#   tnt_gpu_kernels(<object target> <targets that see TNT_GPU_KERNELS...>)
#
# TNT_GPU=AUTO (default): the PTX is built when clang emits it, else the library builds without it
# (a real device then answers "built without GPU kernels"; the emulated device and the host build
# of the kernels work either way). ON: clang is required. OFF: no PTX. With the PTX,
# TNT_GPU_KERNELS is defined and tnt__gpu_ptx exists. Nothing here needs the CUDA SDK.
#
# Alone (the build's own step): cmake -DIN=kernels.ptx -DOUT=kernels_ptx.c -DSYM=tnt__gpu_ptx -P gpu_kernels.cmake

if(CMAKE_SCRIPT_MODE_FILE) # cmake -P: write IN (a PTX file) as `const char SYM[]` into OUT
  file(READ "${IN}" ptx)
  string(REPLACE "\\" "\\\\" ptx "${ptx}")
  string(REPLACE "\"" "\\\"" ptx "${ptx}")
  string(REPLACE "\n" "\\n\"\n\"" ptx "${ptx}")
  file(WRITE "${OUT}.tmp" "/* generated from ${IN} by cmake/gpu_kernels.cmake: do not edit */\n"
                          "extern const char ${SYM}[];\n"
                          "const char ${SYM}[] =\n\"${ptx}\";\n")
  file(RENAME "${OUT}.tmp" "${OUT}")
  return()
endif()

set(TNT_GPU_KERNELS_SCRIPT "${CMAKE_CURRENT_LIST_FILE}")
set(TNT_GPU "AUTO" CACHE STRING "GPU kernels as PTX: AUTO (when clang-14 emits PTX), ON (required) or OFF")
set_property(CACHE TNT_GPU PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${TNT_GPU}" TNT_GPU_MODE)
if(NOT TNT_GPU_MODE MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "TNT_GPU=${TNT_GPU}: expected AUTO, ON or OFF")
endif()

# The flags of GPU-DESIGN.md 3.1: CUDA C for sm_80 as PTX ISA 7.5 (the newest LLVM 14 writes; the
# driver JIT-compiles it for sm_80 and newer), no SDK (--cuda-path=/nonexistent also keeps a
# CUDA 13 install from being looked at), no CUDA headers or libdevice. -ffp-contract=off: clang
# fuses a*b+c into fma for CUDA by default; without the fusion the kernels compute what the host
# build and the CPU engine compute (the optimizer steps bitwise).
set(TNT_GPU_PTX_FLAGS -x cuda --cuda-path=/nonexistent --cuda-device-only -nocudainc -nocudalib
    --cuda-gpu-arch=sm_80 -Xclang -target-feature -Xclang +ptx75 -ffp-contract=off -O3)

function(tnt_gpu_kernels object_target)
  set(TNT_GPU_PTX_BUILT FALSE PARENT_SCOPE)
  if(TNT_GPU_MODE STREQUAL "OFF")
    message(STATUS "GPU kernels: TNT_GPU=OFF; building without them")
    return()
  endif()
  find_program(TNT_CLANG_PTX NAMES clang-14 clang-15 clang-16 clang-17 clang-18 clang-19 clang
               DOC "clang that compiles the CUDA C kernels to PTX (the probe below must pass)")
  set(dir ${CMAKE_BINARY_DIR}/gpu)
  file(MAKE_DIRECTORY ${dir})
  if(TNT_CLANG_PTX AND NOT TNT_CLANG_PTX_WORKS)
    # probe once: a clang without the NVPTX target, or one that refuses a flag, fails here
    file(WRITE ${dir}/probe.cu
         "extern \"C\" __attribute__((global)) void probe(float *x) { x[0] = __nvvm_shfl_sync_down_f32(0xffffffffu, x[1], 1, 31); }\n")
    execute_process(COMMAND ${TNT_CLANG_PTX} ${TNT_GPU_PTX_FLAGS} -S ${dir}/probe.cu -o ${dir}/probe.ptx
                    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
    if(rc EQUAL 0)
      set(TNT_CLANG_PTX_WORKS TRUE CACHE INTERNAL "clang emits PTX")
    else()
      string(REGEX REPLACE "\n.*" "" err "${err}")
      message(STATUS "GPU kernels: ${TNT_CLANG_PTX} does not emit PTX (${err})")
    endif()
  endif()
  if(NOT TNT_CLANG_PTX_WORKS)
    if(TNT_GPU_MODE STREQUAL "ON")
      message(FATAL_ERROR "TNT_GPU=ON needs clang-14 with the NVPTX target (Debian 12: apt-get install clang-14); "
                          "TNT_GPU=AUTO builds without the GPU kernels")
    endif()
    message(STATUS "GPU kernels: no clang-14 that emits PTX; building without them (TNT_GPU=AUTO)")
    return()
  endif()
  set(src ${CMAKE_SOURCE_DIR}/src/gpu/kernels)
  file(GLOB deps CONFIGURE_DEPENDS ${src}/*.cu ${src}/*.h)
  add_custom_command(OUTPUT ${dir}/kernels.ptx
    COMMAND ${TNT_CLANG_PTX} ${TNT_GPU_PTX_FLAGS} -S ${src}/kernels.cu -o ${dir}/kernels.ptx
    DEPENDS ${deps}
    COMMENT "GPU kernels: CUDA C to PTX with ${TNT_CLANG_PTX}" VERBATIM)
  add_custom_command(OUTPUT ${dir}/kernels_ptx.c
    COMMAND ${CMAKE_COMMAND} -DIN=${dir}/kernels.ptx -DOUT=${dir}/kernels_ptx.c -DSYM=tnt__gpu_ptx
            -P ${TNT_GPU_KERNELS_SCRIPT}
    DEPENDS ${dir}/kernels.ptx ${TNT_GPU_KERNELS_SCRIPT} VERBATIM)
  target_sources(${object_target} PRIVATE ${dir}/kernels_ptx.c)
  foreach(t ${object_target} ${ARGN})
    target_compile_definitions(${t} PUBLIC TNT_GPU_KERNELS)
  endforeach()
  set(TNT_GPU_PTX_BUILT TRUE PARENT_SCOPE)
  set(TNT_GPU_PTX_FILE ${dir}/kernels.ptx PARENT_SCOPE)
  message(STATUS "GPU kernels: ${TNT_CLANG_PTX} -> ${dir}/kernels.ptx (embedded as tnt__gpu_ptx)")
endfunction()
