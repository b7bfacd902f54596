# cmake -DLAYER=dpt_ops -DALLOWED=ops,autograd,core -DFILES=a.cc,b.h -DSTAMP=out -P check_layer_includes.cmake
cmake_policy(SET CMP0057 NEW)  # if(IN_LIST) in -P scripts
# Fails when one of FILES includes "dpt/<folder>/..." for a folder not in ALLOWED.
string(REPLACE "," ";" allowed "${ALLOWED}")
string(REPLACE "," ";" files "${FILES}")
set(violations "")
foreach(file ${files})
  file(STRINGS ${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]+\"dpt/")
  foreach(line ${lines})
    string(REGEX MATCH "\"dpt/([a-z_]+)/" _ "${line}")
    set(folder ${CMAKE_MATCH_1})
    if(folder AND NOT folder IN_LIST allowed)
      string(APPEND violations "\n  ${file}: ${line}   (dpt/${folder} is not below ${LAYER})")
    endif()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "${LAYER} may include only dpt/{${ALLOWED}}; upward includes:${violations}\n"
                      "Move the code to the layer it belongs to, or pass it down through an interface "
                      "(see docs/ARCHITECTURE.md).")
endif()
file(TOUCH ${STAMP})
