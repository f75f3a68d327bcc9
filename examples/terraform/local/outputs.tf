# The outputs `warden callback --verb deployed --connection-from` reads
# (workflow.md W3); ../hcloud has the same names and types.

output "host" {
  value = "127.0.0.1"
}

output "port" {
  value = 22
}

output "user" {
  value = var.ssh_user
}

output "ssh_private_key" {
  value     = terraform_data.credentials.output.ssh_private_key
  sensitive = true
}

output "free_domain" {
  value = "${var.marquee_id}.localhost"
}

output "acme_dns" {
  value = {
    server_url  = var.acme_dns_server_url
    username    = terraform_data.credentials.output.acme_username
    password    = terraform_data.credentials.output.acme_password
    subdomain   = terraform_data.credentials.output.acme_subdomain
    full_domain = "${terraform_data.credentials.output.acme_subdomain}.${var.marquee_id}.localhost"
  }
  sensitive = true
}
