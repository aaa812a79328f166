//! The schema commands: `ls`, `createtable`, `deletetable`, `createfamily`,
//! `deletefamily`, `setgcpolicy` (Table Admin API).

use almanac_api::google::bigtable::admin::v2 as admin;
use almanac_api::google::bigtable::admin::v2::modify_column_families_request::modification::Mod;

use super::{Conn, admin_client, gc, key_values, status_error};

/// `ls`: one table id a line.
pub async fn handle_list_tables(conn: &Conn) -> anyhow::Result<()> {
    let mut client = admin_client(conn.channel().await?);
    let mut page_token = String::new();
    loop {
        let req = admin::ListTablesRequest {
            parent: conn.instance_name(),
            page_token,
            ..Default::default()
        };
        let resp = client
            .list_tables(req)
            .await
            .map_err(|s| status_error("ListTables", s))?
            .into_inner();
        for t in &resp.tables {
            println!("{}", t.name.rsplit('/').next().unwrap_or(&t.name));
        }
        if resp.next_page_token.is_empty() {
            return Ok(());
        }
        page_token = resp.next_page_token;
    }
}

/// `ls T`: the families and their GC policies, in columns.
pub async fn handle_list_families(conn: &Conn, table: &str) -> anyhow::Result<()> {
    let mut client = admin_client(conn.channel().await?);
    let req = admin::GetTableRequest {
        name: conn.table_name(table),
        view: admin::table::View::SchemaView as i32,
    };
    let t = client
        .get_table(req)
        .await
        .map_err(|s| status_error("GetTable", s))?
        .into_inner();
    let mut families: Vec<(&String, String)> = t
        .column_families
        .iter()
        .map(|(name, cf)| (name, gc::describe(cf.gc_rule.as_ref())))
        .collect();
    families.sort();
    let header = "Family Name";
    let width = families
        .iter()
        .map(|(n, _)| n.len())
        .chain([header.len()])
        .max()
        .unwrap_or(0)
        + 2;
    println!("{header:<width$}GC Policy");
    println!(
        "{:<width$}{}",
        "-".repeat(header.len()),
        "-".repeat("GC Policy".len())
    );
    for (name, policy) in families {
        println!("{name:<width$}{policy}");
    }
    Ok(())
}

/// `createtable T [families=FAM[:POLICY],...] [splits=KEY,...]`.
pub async fn handle_create_table(
    conn: &Conn,
    table: &str,
    options: &[String],
) -> anyhow::Result<()> {
    let mut table_proto = admin::Table::default();
    let mut initial_splits = Vec::new();
    for (key, value) in key_values(options, &["families", "splits"])? {
        match key {
            "families" => {
                for f in value.split(',').filter(|f| !f.is_empty()) {
                    let (name, rule) = gc::parse_family(f)?;
                    table_proto.column_families.insert(
                        name,
                        admin::ColumnFamily {
                            gc_rule: rule,
                            ..Default::default()
                        },
                    );
                }
            }
            _ => {
                for k in value.split(',').filter(|k| !k.is_empty()) {
                    initial_splits.push(admin::create_table_request::Split {
                        key: k.as_bytes().to_vec().into(),
                    });
                }
            }
        }
    }
    let req = admin::CreateTableRequest {
        parent: conn.instance_name(),
        table_id: table.to_string(),
        table: Some(table_proto),
        initial_splits,
    };
    let mut client = admin_client(conn.channel().await?);
    client
        .create_table(req)
        .await
        .map_err(|s| status_error("CreateTable", s))?;
    Ok(())
}

async fn modify_family(
    conn: &Conn,
    table: &str,
    family: &str,
    change: Mod,
) -> anyhow::Result<admin::Table> {
    let req = admin::ModifyColumnFamiliesRequest {
        name: conn.table_name(table),
        modifications: vec![admin::modify_column_families_request::Modification {
            id: family.to_string(),
            r#mod: Some(change),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut client = admin_client(conn.channel().await?);
    let resp = client
        .modify_column_families(req)
        .await
        .map_err(|s| status_error("ModifyColumnFamilies", s))?;
    Ok(resp.into_inner())
}

/// `deletetable T`.
pub async fn handle_delete_table(conn: &Conn, table: &str) -> anyhow::Result<()> {
    let req = admin::DeleteTableRequest {
        name: conn.table_name(table),
    };
    let mut client = admin_client(conn.channel().await?);
    client
        .delete_table(req)
        .await
        .map_err(|s| status_error("DeleteTable", s))?;
    Ok(())
}

/// `createfamily T FAM[:POLICY]`.
pub async fn handle_create_family(conn: &Conn, table: &str, family: &str) -> anyhow::Result<()> {
    let (name, gc_rule) = gc::parse_family(family)?;
    let cf = admin::ColumnFamily {
        gc_rule,
        ..Default::default()
    };
    modify_family(conn, table, &name, Mod::Create(cf)).await?;
    Ok(())
}

/// `deletefamily T FAM`.
pub async fn handle_delete_family(conn: &Conn, table: &str, family: &str) -> anyhow::Result<()> {
    modify_family(conn, table, family, Mod::Drop(true)).await?;
    Ok(())
}

/// `setgcpolicy T FAM POLICY`; prints the policy the server now holds.
pub async fn handle_set_gc_policy(
    conn: &Conn,
    table: &str,
    family: &str,
    policy: &str,
) -> anyhow::Result<()> {
    let cf = admin::ColumnFamily {
        gc_rule: gc::parse_policy(policy)?,
        ..Default::default()
    };
    let t = modify_family(conn, table, family, Mod::Update(cf)).await?;
    let now = t
        .column_families
        .get(family)
        .and_then(|cf| cf.gc_rule.as_ref());
    println!("{family}: {}", gc::describe(now));
    Ok(())
}
