# jobenv stage: run "$@" with this host's staged copy of the environment first on PATH.
# JOBENV_STAGED is the copy's path, `%h` standing for the host name (set by `jobenv get`
# from the record).  A host without a verified copy runs "$@" unchanged.  POSIX sh, no
# fork on the common path: it runs once per rank.
p=${JOBENV_STAGED-}
case $p in
*%h*)
    h=
    read -r h < /proc/sys/kernel/hostname 2>/dev/null || h=$(uname -n)
    out=
    while :; do
        case $p in
        *%h*) out=$out${p%%"%h"*}$h; p=${p#*"%h"} ;;
        *) break ;;
        esac
    done
    p=$out$p ;;
esac
if [ -n "$p" ] && [ -f "$p/.jobenv-stage.json" ]; then
    PATH=$p/bin:$PATH
    export PATH
    if [ -d "$p/conda-meta" ]; then CONDA_PREFIX=$p; export CONDA_PREFIX
    else VIRTUAL_ENV=$p; export VIRTUAL_ENV; fi
fi
exec "$@"
