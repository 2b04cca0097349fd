# SPDX-License-Identifier: Apache-2.0
# cmake -DIN=FILE -DOUT=FILE.c -DNAME=SYMBOL -P EmbedText.cmake
# Writes FILE's bytes as `const char SYMBOL[]` (NUL-terminated) into FILE.c:
# the runtime's own device source (templates/quant.cu) goes into libkiln
# this way, with a name of its own (tools/embed.c's table is the compiler's).
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# One line per 32 bytes (32 x "0xNN," is 160 characters).
string(REGEX REPLACE "((0x..,){32})" "\\1\n" bytes "${bytes}")
get_filename_component(base ${IN} NAME)
file(WRITE ${OUT} "/* generated from ${base} by cmake/EmbedText.cmake; do not edit */\n"
                  "const char ${NAME}[] = {\n${bytes}0};\n")
