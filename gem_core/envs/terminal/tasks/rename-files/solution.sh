cd photos && for f in IMG_*.JPG; do n=${f#IMG_}; n=${n%.JPG}; case $n in ''|*[!0-9]*) continue;; esac; mv -- "$f" "$(printf 'photo-%04d.jpg' "$((10#$n))")"; done
