find scripts -type f -name '*.sh' -exec chmod 755 {} + && chmod 600 secrets/* && chmod 700 secrets && chmod 444 README.txt
