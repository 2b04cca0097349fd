# SPDX-License-Identifier: Apache-2.0
# kiln_file_list_stamp(VAR PATH FILE...): writes the sorted list of FILEs to
# PATH (only when the list changed) and sets VAR to PATH, for a custom
# command's DEPENDS.  A globbed input that is deleted or moved away leaves
# every remaining dependency older than the output, so without this the
# output (the catalog, the bundle) would keep the file that is gone.  The
# globs are CONFIGURE_DEPENDS: such a change reruns CMake, which rewrites
# the list, which is then newer than the output.
function(kiln_file_list_stamp var path)
  set(files ${ARGN})
  list(SORT files)
  string(REPLACE ";" "\n" text "${files}")
  file(CONFIGURE OUTPUT ${path} CONTENT "${text}\n" @ONLY)
  set(${var} ${path} PARENT_SCOPE)
endfunction()
