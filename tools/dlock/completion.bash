# bash completion for dlock(1); installed as share/bash-completion/completions/dlock.
# Hand-written: keep it in step with tools/dlock/main.cpp. tests/package/completion_check fails
# when a subcommand or an option of `dlock --help` / `dlock SUB --help` is missing here.
# Needs nothing but bash (not the bash-completion package's helpers).

_dlock() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=
  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
  COMPREPLY=()

  local global='--url --user --password --ca --cert --key --sni --timeout -v --verbose -h --help'
  local commands='exec status unlock latch ping'
  # The options that take a value: the word after one is not a subcommand or a NAME.
  local valued=' --url --user --password --ca --cert --key --sni --timeout --wait --lease
    --kill-after --permits --match --limit '

  # The subcommand, the words after it (not options or their values), and whether exec's `--`
  # has been seen (the command to run comes after it).
  local sub= i w after_dashes=0 dash_at=0
  local -a args=()
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=${COMP_WORDS[i]}
    if [[ $sub == exec && $w == -- ]]; then
      after_dashes=1 dash_at=$i
      break
    fi
    if [[ $valued == *" $w "* ]]; then
      ((i++))
    elif [[ $w != -* ]]; then
      if [[ -z $sub ]]; then sub=$w; else args+=("$w"); fi
    fi
  done

  # exec NAME -- CMD ARGS: a command name, then bash's default (files).
  if ((after_dashes)); then
    if ((COMP_CWORD == dash_at + 1)); then
      mapfile -t COMPREPLY < <(compgen -c -- "$cur")
    else
      compopt -o default 2>/dev/null
    fi
    return 0
  fi

  case $prev in
    --ca | --cert | --key)
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      return 0
      ;;
    --url)
      mapfile -t COMPREPLY < <(compgen -W 'redis:// rediss:// redis+cluster:// rediss+cluster://
        redis+sentinel:// rediss+sentinel://' -- "$cur")
      compopt -o nospace 2>/dev/null
      return 0
      ;;
    --user | --password | --sni | --timeout | --wait | --lease | --kill-after | --permits | \
      --match | --limit)
      return 0
      ;;
  esac

  local own=
  case $sub in
    exec) own='--wait --lease --kill-after --fair --shared --rw --permits' ;;
    status) own='--json --metrics --match --limit' ;;
    unlock) own='--force' ;;
    latch) own='--timeout' ;;
    ping) own= ;;
    '')
      if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$global --version" -- "$cur")
      else
        mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
      fi
      return 0
      ;;
    *) return 0 ;;
  esac

  if [[ $cur == -* ]]; then
    # Global options may also follow the subcommand.
    mapfile -t COMPREPLY < <(compgen -W "$own $global" -- "$cur")
  elif [[ $sub == latch && ${#args[@]} -eq 1 ]]; then
    mapfile -t COMPREPLY < <(compgen -W 'set count-down wait count' -- "$cur")
  fi
  return 0
}

complete -F _dlock dlock
