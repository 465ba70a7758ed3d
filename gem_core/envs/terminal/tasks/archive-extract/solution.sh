mkdir -p extracted && tar -xzf incoming/bundle.tar.gz -C extracted && (cd extracted && find . -type f -name '*.conf' | sed 's#^\./##' | tar -czf ../configs.tar.gz -T -)
