# The library's layers, one static library per folder of src/dpt, each linking only the
# layers below it. dpt_layer() also checks, whenever a source or header of the folder
# changes, that every `#include "dpt/<folder>/..."` in it names its own folder or a folder
# of a layer it links: an upward include fails the build with the file and line, so the
# layering in docs/ARCHITECTURE.md cannot erode silently.
set(DPT_LAYER_CHECK ${CMAKE_CURRENT_LIST_DIR}/check_layer_includes.cmake)

# dpt_layer(<target> FOLDER <folder under src/dpt> SOURCES <.cc/.cu...> [DEPENDS <lower layer targets...>])
function(dpt_layer target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "FOLDER" "SOURCES;DEPENDS")
  set(root ${PROJECT_SOURCE_DIR}/src/dpt)
  list(TRANSFORM arg_SOURCES PREPEND ${root}/${arg_FOLDER}/)
  add_library(${target} STATIC ${arg_SOURCES})
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>)
  target_link_libraries(${target} PUBLIC ${arg_DEPENDS})

  # The folders this layer may include: its own and those of every layer below it.
  set(allowed ${arg_FOLDER})
  foreach(dep ${arg_DEPENDS})
    if(dep MATCHES "^\\$<LINK_LIBRARY:[A-Z_]+,(.+)>$")  # a layer linked whole
      set(dep ${CMAKE_MATCH_1})
    endif()
    if(TARGET ${dep})
      get_target_property(dep_folders ${dep} DPT_LAYER_FOLDERS)
      if(dep_folders)
        list(APPEND allowed ${dep_folders})
      endif()
    endif()
  endforeach()
  list(REMOVE_DUPLICATES allowed)
  set_target_properties(${target} PROPERTIES DPT_LAYER_FOLDERS "${allowed}")

  file(GLOB_RECURSE headers CONFIGURE_DEPENDS ${root}/${arg_FOLDER}/*.h ${root}/${arg_FOLDER}/*.cuh)
  set(checked ${arg_SOURCES} ${headers})
  set(stamp ${CMAKE_CURRENT_BINARY_DIR}/${target}.layer-check)
  string(JOIN "," allowed_arg ${allowed})
  string(JOIN "," files_arg ${checked})
  add_custom_command(OUTPUT ${stamp}
                     COMMAND ${CMAKE_COMMAND} -DLAYER=${target} -DALLOWED=${allowed_arg} -DFILES=${files_arg}
                             -DSTAMP=${stamp} -P ${DPT_LAYER_CHECK}
                     DEPENDS ${checked} ${DPT_LAYER_CHECK}
                     COMMENT "Checking that ${target} includes only its own and lower layers")
  add_custom_target(${target}_layer_check DEPENDS ${stamp})
  add_dependencies(${target} ${target}_layer_check)
endfunction()
