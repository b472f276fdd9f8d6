# DLOCK_SANITIZE applies to every target of this build (library, tests, tools) so that
# instrumented and uninstrumented code never mix.
if(DLOCK_SANITIZE)
  add_compile_options(-fsanitize=${DLOCK_SANITIZE} -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=${DLOCK_SANITIZE})
  if(DLOCK_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()
