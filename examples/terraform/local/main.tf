# The local flavour of a tutorial marquee (workflow.md W5): the same
# variables and outputs as ../hcloud, built only on Terraform's built-in
# terraform_data resource, so `terraform init` downloads nothing and the
# whole workflow runs offline (make run, the end-to-end test). Nothing is
# started: the "host" is this machine.

terraform {
  required_version = ">= 1.5"
}

variable "marquee_id" {
  type        = string
  description = "The marquee this infrastructure belongs to (warden's id)."
}

variable "generation" {
  type        = number
  description = "The dispatch's generation: a redeploy replaces the host."
}

variable "ssh_user" {
  type    = string
  default = "root"
}

variable "acme_dns_server_url" {
  type    = string
  default = "http://127.0.0.1:8053"
}

# The "server": replaced whenever the generation changes, as a redeploy
# replaces the real one.
resource "terraform_data" "server" {
  input = {
    marquee_id = var.marquee_id
    generation = var.generation
  }
  triggers_replace = [var.generation]
}

# Credentials the real module would create (an SSH key, an acme-dns
# account); here derived from the server's id so each generation has its
# own and nothing secret is committed.
resource "terraform_data" "credentials" {
  input = {
    ssh_private_key = "-----BEGIN OPENSSH PRIVATE KEY-----\nlocal-flavour-${terraform_data.server.id}\n-----END OPENSSH PRIVATE KEY-----\n"
    acme_username   = "local-${substr(sha256(terraform_data.server.id), 0, 12)}"
    acme_password   = sha256("password/${terraform_data.server.id}")
    acme_subdomain  = substr(sha256("subdomain/${terraform_data.server.id}"), 0, 16)
  }
}
