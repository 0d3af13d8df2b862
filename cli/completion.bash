# bash completion for epochcast: commands, options, and the bundled scenarios, models, machines,
# profiles and GPU catalogue ids (--gpu) where an argument takes one, as `epochcast __complete`
# lists them (the binary knows its own options, `topo --from-nvidia-smi FILE --smi-query FILE`
# included, so this file never goes stale); file names beside them. Installed as
# <prefix>/share/bash-completion/completions/epochcast; from a build tree:
#   source cli/completion.bash
_epochcast() {
  # The words as typed up to the cursor, split at blanks only: bash's COMP_WORDS also splits at
  # '=', and `--set hardware=dgx-a100` is one word to epochcast.
  local line=${COMP_LINE:0:COMP_POINT}
  local -a words
  read -ra words <<< "$line"
  [[ $line =~ [[:space:]]$ ]] && words+=("")
  local typed=${words[${#words[@]}-1]}
  local IFS=$'\n'
  local -a offered
  offered=($("${COMP_WORDS[0]}" __complete "${words[@]:1}" 2> /dev/null))
  # bash replaces only its own current word, which starts after the last '=' of ours.
  if [[ $typed == *=* && $COMP_WORDBREAKS == *=* ]]; then
    offered=("${offered[@]#"${typed%=*}="}")
  fi
  COMPREPLY=("${offered[@]}")
  # A path is always an answer where a value is typed (a scenario file, an output).
  local current=${COMP_WORDS[COMP_CWORD]}
  if [[ $current != -* && $current != "=" ]]; then
    COMPREPLY+=($(compgen -f -- "$current"))
  fi
}
complete -o filenames -F _epochcast epochcast
