# Warnings for every dlock target: dlock_warnings(<target>)
function(dlock_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion
                                           -Wshadow -Wnon-virtual-dtor -Wold-style-cast)
  if(DLOCK_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
