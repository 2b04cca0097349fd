# SPDX-License-Identifier: Apache-2.0
# KilnPackage.cmake — kiln as a library others can use: the versioned
# libkiln.so, one static libkiln.a, the default bundle, install() rules,
# kilnConfig.cmake (kiln::kiln, kiln::kiln_static) and kiln.pc.
# Included from the top-level CMakeLists.txt after every add_subdirectory, so
# that the targets it dresses (kiln_shared, kiln) and their links are known.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# --- libkiln.so: libkiln.so -> libkiln.so.0 -> libkiln.so.0.1.0 -------------
# The SONAME carries the major version: programs linked against 0.x load any
# 0.y (bump the major, or the SOVERSION, on an ABI break).
set_target_properties(kiln_shared PROPERTIES
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}
  EXPORT_NAME kiln
  # Installed copies find what they link from outside the prefix (the CUDA
  # toolkit's libraries) where the build found them; libraries opened with
  # dlopen are searched there too.
  INSTALL_RPATH_USE_LINK_PATH ON)
set_target_properties(kiln PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

# The folders' include directories are build-tree paths (runtime/ holds
# private headers): installed users see only include/.
function(kiln_build_interface_only target)
  get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
  set(wrapped)
  foreach(d IN LISTS dirs)
    if(d MATCHES "^\\$<")
      list(APPEND wrapped "${d}")
    else()
      list(APPEND wrapped "$<BUILD_INTERFACE:${d}>")
    endif()
  endforeach()
  list(APPEND wrapped "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
  set_property(TARGET ${target} PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${wrapped}")
endfunction()
kiln_build_interface_only(kiln_shared)

# --- what libkiln.so is made of ------------------------------------------------
# Walks kiln_shared's link closure: our static libraries (whose objects the
# shared library holds) and what lies outside (system and CUDA libraries).
# Computed, not listed, so the static archive follows the folders' links.
function(kiln_link_closure target out_archives out_external)
  set(archives)
  set(external)
  get_target_property(todo ${target} LINK_LIBRARIES)
  set(seen)
  while(todo)
    list(POP_FRONT todo item)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
    if(NOT item OR item IN_LIST seen)
      continue()
    endif()
    list(APPEND seen "${item}")
    if(TARGET ${item})
      get_target_property(imported ${item} IMPORTED)
      get_target_property(type ${item} TYPE)
      if(imported)
        list(APPEND external "${item}")
        continue()
      endif()
      if(type STREQUAL "STATIC_LIBRARY" OR type STREQUAL "OBJECT_LIBRARY")
        list(APPEND archives ${item})
      endif()
      get_target_property(next ${item} INTERFACE_LINK_LIBRARIES)
      if(next)
        list(APPEND todo ${next})
      endif()
    else()
      list(APPEND external "${item}")
    endif()
  endwhile()
  set(${out_archives} "${archives}" PARENT_SCOPE)
  set(${out_external} "${external}" PARENT_SCOPE)
endfunction()
kiln_link_closure(kiln_shared KILN_ARCHIVES KILN_EXTERNAL_LIBS)

# --- libkiln.a: one archive, everything libkiln.so holds -----------------------
# The shared library's own objects (PIC, as every object here) and those of
# the static libraries it links: nothing compiled twice, no link order left
# to the user.
set(KILN_STATIC_OBJECTS "$<TARGET_OBJECTS:kiln_shared>")
foreach(a IN LISTS KILN_ARCHIVES)
  list(APPEND KILN_STATIC_OBJECTS "$<TARGET_OBJECTS:${a}>")
endforeach()
add_library(kiln_static STATIC ${KILN_STATIC_OBJECTS})
set_target_properties(kiln_static PROPERTIES OUTPUT_NAME kiln EXPORT_NAME kiln_static
  LINKER_LANGUAGE C)
target_include_directories(kiln_static INTERFACE
  $<BUILD_INTERFACE:${KILN_ROOT}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(kiln_static INTERFACE ${KILN_EXTERNAL_LIBS})

# For add_subdirectory() and FetchContent users: the names find_package gives.
add_library(kiln::kiln ALIAS kiln_shared)
add_library(kiln::kiln_static ALIAS kiln_static)

# --- the default bundle: every shipped spec for sm_90a ---------------------------
# Built with `kiln pack` (no GPU needed) into build/kiln-sm_90a.kbundle, the
# file scripts/run.sh and scripts/gpu_all.sh use.  A cache inside the build
# folder keeps the build from writing to $HOME.
set(KILN_BUNDLE_FILE ${KILN_GEN}/kiln-sm_90a.kbundle)
if(KILN_BUILD_BUNDLE)
  set(KILN_PACK_CACHE_DIR ${KILN_GEN}/pack-cache)
  if(KILN_PACK_CACHE)
    set(KILN_PACK_CACHE_DIR ${KILN_PACK_CACHE})
  endif()
  file(GLOB_RECURSE KILN_SHIPPED_SPECS CONFIGURE_DEPENDS ${KILN_ROOT}/specs/*.yaml)
  kiln_file_list_stamp(KILN_SHIPPED_SPECS_LIST ${KILN_GEN}/shipped_specs.list ${KILN_SHIPPED_SPECS})
  add_custom_command(
    OUTPUT ${KILN_BUNDLE_FILE}
    # Relative spec paths, as the catalog: sources name specs/... wherever
    # the checkout lives.
    COMMAND kiln pack specs --arch sm_90a -o ${KILN_BUNDLE_FILE}
            --cache-dir ${KILN_PACK_CACHE_DIR}
    WORKING_DIRECTORY ${KILN_ROOT}
    DEPENDS kiln ${KILN_SHIPPED_SPECS} ${KILN_SHIPPED_SPECS_LIST} ${KILN_TEMPLATE_FILES}
    COMMENT "Packing every shipped spec for sm_90a into kiln-sm_90a.kbundle")
  add_custom_target(kiln_bundle ALL DEPENDS ${KILN_BUNDLE_FILE})
endif()

# --- install ---------------------------------------------------------------------
if(KILN_INSTALL)
  set(KILN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
  install(FILES ${KILN_ROOT}/include/kiln.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(TARGETS kiln_shared kiln_static EXPORT kilnTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(TARGETS kiln RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  if(KILN_BUILD_BUNDLE)
    install(FILES ${KILN_BUNDLE_FILE} DESTINATION ${CMAKE_INSTALL_DATADIR}/kiln)
  endif()
  install(FILES ${KILN_ROOT}/LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/kiln)

  # kilnConfig.cmake: kiln::kiln (shared) and kiln::kiln_static.  The static
  # archive's CUDA dependencies (NVRTC while it is linked) are looked for
  # quietly, so that users of the shared library need no toolkit.
  set(KILN_CONFIG_DEPENDENCIES "")
  foreach(lib IN LISTS KILN_EXTERNAL_LIBS)
    if(lib MATCHES "^CUDA::")
      set(KILN_CONFIG_DEPENDENCIES "find_package(CUDAToolkit QUIET)")
    endif()
  endforeach()
  install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${KILN_CMAKE_DIR})
  configure_package_config_file(${KILN_ROOT}/cmake/kilnConfig.cmake.in
    ${KILN_GEN}/kilnConfig.cmake INSTALL_DESTINATION ${KILN_CMAKE_DIR}
    PATH_VARS CMAKE_INSTALL_DATADIR)
  # 0.x: a new minor version may change the API, so find_package(kiln 0.1)
  # takes 0.1.* only.
  write_basic_package_version_file(${KILN_GEN}/kilnConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(FILES ${KILN_GEN}/kilnConfig.cmake ${KILN_GEN}/kilnConfigVersion.cmake
    DESTINATION ${KILN_CMAKE_DIR})

  # kiln.pc, relocatable: paths from the file's own folder, so that
  # `cmake --install --prefix P` to any P gives a working file.
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    set(KILN_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  else()
    string(REGEX REPLACE "[^/]+" ".." up "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
    set(KILN_PC_PREFIX "\${pcfiledir}/${up}")
  endif()
  set(KILN_PC_LIBS_PRIVATE "")
  foreach(lib IN LISTS KILN_EXTERNAL_LIBS)
    if(TARGET ${lib})
      get_target_property(loc ${lib} IMPORTED_LOCATION)
      get_filename_component(dir "${loc}" DIRECTORY)
      get_filename_component(name "${loc}" NAME_WE)
      string(REGEX REPLACE "^lib" "" name "${name}")
      string(APPEND KILN_PC_LIBS_PRIVATE " -L${dir} -l${name}")
    elseif(IS_ABSOLUTE "${lib}")
      string(APPEND KILN_PC_LIBS_PRIVATE " ${lib}")
    else()
      string(APPEND KILN_PC_LIBS_PRIVATE " -l${lib}")
    endif()
  endforeach()
  string(STRIP "${KILN_PC_LIBS_PRIVATE}" KILN_PC_LIBS_PRIVATE)
  configure_file(${KILN_ROOT}/cmake/kiln.pc.in ${KILN_GEN}/kiln.pc @ONLY)
  install(FILES ${KILN_GEN}/kiln.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

# --- the install test (tests/install/) ------------------------------------------
if(KILN_BUILD_TESTS AND KILN_INSTALL)
  add_test(NAME install
    COMMAND bash ${KILN_ROOT}/tests/install/test_install.sh ${KILN_GEN} ${CMAKE_COMMAND}
            ${CMAKE_C_COMPILER} ${CMAKE_GENERATOR} $<IF:$<BOOL:${KILN_BUILD_BUNDLE}>,ON,OFF>)
  set_tests_properties(install PROPERTIES LABELS cpu SKIP_RETURN_CODE 77)
endif()
