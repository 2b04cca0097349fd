// snippet from the override directory
