# Installation (`cmake --install build [--prefix DIR]`) and the Debian packages
# (`cpack --config build/CPackConfig.cmake -G DEB`). Two components, two packages:
#   cli      epochcast: the simulator's CLI, its bundled data (share/epochcast), the docs, the
#            man page and bash completion; needs no LibTorch
#   runtime  epochcast-runtime: epochcast-run (`epochcast run` and `bench`), built with LibTorch
# Every binary finds the data relative to itself (core/spec/data_paths.h), so a prefix can be
# moved as a whole.

foreach(folder IN LISTS EPOCHCAST_DATA_FOLDERS)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${folder} DESTINATION ${CMAKE_INSTALL_DATADIR}/epochcast
    COMPONENT cli)
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT cli)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT cli)
install(FILES ${PROJECT_SOURCE_DIR}/cli/completion.bash
  DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME epochcast COMPONENT cli)

# The man page, from the commands' own --help (help2man), when help2man is installed.
find_program(EPOCHCAST_HELP2MAN help2man)
if(EPOCHCAST_HELP2MAN AND TARGET epochcast)
  set(man_page ${CMAKE_BINARY_DIR}/man/epochcast.1)
  set(man_page_binaries epochcast)
  if(TARGET epochcast-run)
    list(APPEND man_page_binaries epochcast-run)  # `epochcast run --help` is answered by it
  endif()
  add_custom_command(OUTPUT ${man_page}
    COMMAND ${CMAKE_COMMAND} -DEPOCHCAST=$<TARGET_FILE:epochcast> -DHELP2MAN=${EPOCHCAST_HELP2MAN}
      -DVERSION=${PROJECT_VERSION} -DOUTPUT=${man_page}
      -P ${PROJECT_SOURCE_DIR}/cmake/man_page.cmake
    DEPENDS ${man_page_binaries} ${PROJECT_SOURCE_DIR}/cmake/man_page.cmake
    COMMENT "Writing the man page (help2man)" VERBATIM)
  add_custom_target(epochcast_man_page ALL DEPENDS ${man_page})
  install(FILES ${man_page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT cli)
else()
  message(STATUS "help2man not found: no man page")
endif()

set(CPACK_PACKAGE_NAME epochcast)
set(CPACK_PACKAGE_VENDOR "epochcast")
set(CPACK_PACKAGE_CONTACT "epochcast maintainers <maintainers@epochcast.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "predicts epoch time of data-parallel training against batch size and GPU count")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL cli)
if(TARGET epochcast-run)
  list(APPEND CPACK_COMPONENTS_ALL runtime)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
# The libraries each binary links, as dpkg-shlibdeps finds them (yaml-cpp, fmt, Ceres, LibTorch).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_CLI_PACKAGE_NAME epochcast)
set(CPACK_DEBIAN_CLI_PACKAGE_RECOMMENDS "gnuplot-nox")  # --plot draws with gnuplot
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME epochcast-runtime)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "epochcast (= ${PROJECT_VERSION})")
set(CPACK_COMPONENT_CLI_DESCRIPTION
  "epochcast's simulator and command-line tool, with its GPU catalogue, machines and scenarios")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
  "epochcast-run: runs epochcast scenarios for real with LibTorch (epochcast run, epochcast bench)")
include(CPack)
